"""infra/constructs/logs_key.py alone in a bare stack: one key for all the
stack's log groups, usable by CloudWatch Logs for exactly those groups, and
one removal policy for it."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from infra.constructs.logs_key import encrypted_log_group, stack_key


def _stack() -> cdk.Stack:
    return cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region="eu-west-1"))


def _group(stack: cdk.Stack, name: str, policy: cdk.RemovalPolicy) -> logs.LogGroup:
    return encrypted_log_group(
        stack,
        name,
        what=f"the {name} function",
        retention=logs.RetentionDays.ONE_WEEK,
        removal_policy=policy,
    )


def _resources(stack: cdk.Stack, kind: str) -> list[dict[str, Any]]:
    template = Template.from_stack(stack).to_json()
    return [r for r in template["Resources"].values() if r["Type"] == kind]


def test_the_stacks_groups_share_one_key_named_for_each_group() -> None:
    stack = _stack()
    for name in ("First", "Second"):
        _group(stack, name, cdk.RemovalPolicy.RETAIN)
    (key,) = _resources(stack, "AWS::KMS::Key")
    assert key["Properties"]["EnableKeyRotation"] is True
    description = key["Properties"]["Description"]
    assert "the First function" in description and "the Second function" in description
    (statement,) = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s.get("Sid") == "CloudWatchLogsUse"
    ]
    arns = statement["Condition"]["ArnEquals"]["kms:EncryptionContext:aws:logs:arn"]
    tails = sorted(arn["Fn::Join"][1][-1] for arn in arns)
    assert tails == [":log-group:/Bare/First", ":log-group:/Bare/Second"]
    groups = _resources(stack, "AWS::Logs::LogGroup")
    assert len(groups) == 2
    assert {g["Properties"]["KmsKeyId"]["Fn::GetAtt"][0] for g in groups} == {
        next(iter(Template.from_stack(stack).find_resources("AWS::KMS::Key")))
    }


def test_a_second_removal_policy_in_one_stack_is_refused() -> None:
    stack = _stack()
    _group(stack, "First", cdk.RemovalPolicy.RETAIN)
    with pytest.raises(ValueError, match="removal policy"):
        stack_key(stack, cdk.RemovalPolicy.DESTROY)
