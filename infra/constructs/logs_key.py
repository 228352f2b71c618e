"""KMS-encrypted CloudWatch log groups (VPC flow logs, MSK broker logs).

Why a customer key: flow logs and broker logs name hosts, ports and clients of
the instance; a key of the instance's own lets its owner revoke or audit every
read. CloudWatch Logs encrypts with the key itself, so the key policy must let
the regional CloudWatch Logs principal use it, limited by the encryption
context to log groups of this account and region:
https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
(the ``kms:EncryptionContext:aws:logs:arn`` condition, ``ArnEquals`` the log
group's ARN). The condition names the one log group the key encrypts: the group
is given a name (``/<construct path>/<id>``), so its ARN is known without a
reference to the group, which would be a cycle (the group needs the key).
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

# infra/config.py's LOG_RETENTION_DAYS as CDK names them (tests/infra/test_config.py
# checks the two list the same days).
RETENTION: Final = {
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def retention_days(days: int) -> logs.RetentionDays:
    """A validated ``retention.*_log_days`` (infra/config.py) as CDK's enum."""
    return RETENTION[days]


def log_group_name(scope: Construct, construct_id: str) -> str:
    """``/<stack>/<construct path>/<construct_id>``: unique per stack (stacks
    are named per instance) and known at synth time."""
    return f"/{scope.node.path}/{construct_id}"


def log_group_arn(name: str) -> str:
    """The ARN CloudWatch Logs puts in the encryption context (no ``:*``)."""
    return f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:{name}"


def log_group_key(
    scope: Construct, construct_id: str, *, what: str, name: str, removal_policy: RemovalPolicy
) -> kms.Key:
    """A rotated key CloudWatch Logs may use for the log group ``name`` only."""
    key = kms.Key(
        scope,
        construct_id,
        description=f"Encrypts the CloudWatch log group of {what}",
        enable_key_rotation=True,
        removal_policy=removal_policy,
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchLogsUse",
            principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
            actions=[
                "kms:Encrypt*",
                "kms:Decrypt*",
                "kms:ReEncrypt*",
                "kms:GenerateDataKey*",
                "kms:Describe*",
            ],
            resources=["*"],
            conditions={"ArnEquals": {"kms:EncryptionContext:aws:logs:arn": log_group_arn(name)}},
        )
    )
    return key


def encrypted_log_group(
    scope: Construct,
    construct_id: str,
    *,
    what: str,
    retention: logs.RetentionDays,
    removal_policy: RemovalPolicy,
) -> logs.LogGroup:
    """A log group under a rotated key of its own (``<construct_id>Key``),
    named after its place in the app (:func:`log_group_name`)."""
    name = log_group_name(scope, construct_id)
    key = log_group_key(
        scope, f"{construct_id}Key", what=what, name=name, removal_policy=removal_policy
    )
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        retention=retention,
        encryption_key=key,
        removal_policy=removal_policy,
    )
