"""infra/constructs/emr_disk_key.py alone in a bare stack: a rotated key each
user may encrypt with and manage EBS grants on, with ``kms:CreateGrant`` only
for grants an AWS service makes (``kms:GrantIsForAWSResource``)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from infra.constructs.emr_disk_key import EBS_KEY_ACTIONS, local_disk_key


def _template() -> dict[str, Any]:
    stack = cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region="eu-west-1"))
    users = tuple(
        iam.Role(stack, name, assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
        for name in ("Instance", "Service")
    )
    local_disk_key(
        stack,
        "LocalDiskKey",
        cluster_name="orders",
        users=tuple((role, role) for role in users),
        removal_policy=cdk.RemovalPolicy.DESTROY,
    )
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


def _actions(statement: dict[str, Any]) -> set[str]:
    actions = statement["Action"]
    return {actions} if isinstance(actions, str) else set(actions)


def test_the_key_is_rotated_and_follows_the_removal_policy() -> None:
    (key,) = [r for r in _template()["Resources"].values() if r["Type"] == "AWS::KMS::Key"]
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["Properties"]["Description"] == "Encrypts local and EBS disks of EMR cluster orders"
    assert key["DeletionPolicy"] == "Delete"


def test_each_user_gets_ebs_actions_and_create_grant_for_aws_services_only() -> None:
    policies = [
        r["Properties"]["PolicyDocument"]["Statement"]
        for r in _template()["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy"
    ]
    assert len(policies) == 2
    for statements in policies:
        granted = set().union(*(_actions(s) for s in statements))
        assert set(EBS_KEY_ACTIONS) | {"kms:Encrypt", "kms:Decrypt"} <= granted
        (create,) = [s for s in statements if _actions(s) == {"kms:CreateGrant"}]
        assert create["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": True}}
