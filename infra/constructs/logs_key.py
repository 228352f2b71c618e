"""KMS-encrypted CloudWatch log groups (VPC flow logs, MSK broker logs).

Why a customer key: flow logs and broker logs name hosts, ports and clients of
the instance; a key of the instance's own lets its owner revoke or audit every
read. CloudWatch Logs encrypts with the key itself, so the key policy must let
the regional CloudWatch Logs principal use it, limited by the encryption
context to log groups of this account and region:
https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
(the ``kms:EncryptionContext:aws:logs:arn`` condition). The condition names
the account's log groups by pattern, not the one group: the group's ARN needs
the key first, so naming it would be a dependency cycle.
"""

from __future__ import annotations

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct


def encrypted_log_group(
    scope: Construct,
    construct_id: str,
    *,
    what: str,
    retention: logs.RetentionDays,
    removal_policy: RemovalPolicy,
) -> logs.LogGroup:
    """A log group under a rotated key of its own (``<construct_id>Key``)."""
    key = kms.Key(
        scope,
        f"{construct_id}Key",
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
            conditions={
                "ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": (
                        f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:*"
                    )
                }
            },
        )
    )
    return logs.LogGroup(
        scope,
        construct_id,
        retention=retention,
        encryption_key=key,
        removal_policy=removal_policy,
    )
