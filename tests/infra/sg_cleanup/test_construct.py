"""infra/sg_cleanup/construct.py alone in a bare stack: the function's code is
its neighbour handler.py, inlined to the byte; it waits for its policy only; it
may revoke on the groups it names and nothing else (the synthesized stacks:
tests/infra/stacks/test_first_deploy.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from infra.config import EmrConfig, RetentionConfig
from infra.sg_cleanup import handler
from infra.sg_cleanup.construct import SG_CLEANUP_SOURCE, security_group_cleanup


def _bare_cleanup(group_count: int) -> dict[str, Any]:
    app = cdk.App()
    stack = cdk.Stack(app, "Bare", env=cdk.Environment(account="123456789012", region="eu-west-1"))
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1, nat_gateways=0, subnet_configuration=[])
    groups = tuple(
        ec2.SecurityGroup(stack, f"Group{index}", vpc=vpc) for index in range(group_count)
    )
    security_group_cleanup(
        stack,
        groups=groups,
        config=EmrConfig(tls_certificates_s3_uri="s3://certs-b/a.zip"),
        retention=RetentionConfig(),
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


def _of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def test_the_function_runs_the_handler_beside_the_construct() -> None:
    assert Path(handler.__file__) == SG_CLEANUP_SOURCE
    template = _bare_cleanup(3)
    functions = _of_type(template, "AWS::Lambda::Function")
    assert len(functions) == 1
    (function,) = functions.values()
    assert function["Properties"]["Handler"] == "index.handler"
    code = function["Properties"]["Code"]["ZipFile"]
    assert code == SG_CLEANUP_SOURCE.read_text(encoding="utf-8")
    assert "def revoke_cross_references(" in code


def test_the_function_waits_for_its_policy_only() -> None:
    template = _bare_cleanup(3)
    (function,) = _of_type(template, "AWS::Lambda::Function").values()
    policies = _of_type(template, "AWS::IAM::Policy")
    assert len(policies) == 1
    assert function["DependsOn"] == list(policies)


def test_it_revokes_on_the_named_groups_only() -> None:
    template = _bare_cleanup(2)
    (cleanup,) = _of_type(template, "Custom::EmrSecurityGroupCleanup").values()
    named = cleanup["Properties"]["GroupIds"]
    assert len(named) == 2
    (policy,) = _of_type(template, "AWS::IAM::Policy").values()
    revoke = [
        s
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if "ec2:RevokeSecurityGroupIngress" in s["Action"]
    ]
    assert len(revoke) == 1
    assert revoke[0]["Action"] == [
        "ec2:RevokeSecurityGroupIngress",
        "ec2:RevokeSecurityGroupEgress",
    ]
    resources = revoke[0]["Resource"]
    assert len(resources) == 2
    for resource, group in zip(resources, named, strict=True):
        assert group in resource["Fn::Join"][1]
