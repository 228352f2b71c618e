"""The EMR cluster's disk key: a rotated KMS key of the instance's own for the
nodes' local and EBS disks, and the grants the two roles that use it need.

The nodes encrypt their disks with the key, and EMR creates grants on it for
EBS. EBS with a customer key needs ``kms:DescribeKey``, and ``kms:CreateGrant``
only for grants an AWS service makes on the caller's behalf
(``kms:GrantIsForAWSResource``):
https://docs.aws.amazon.com/ebs/latest/userguide/ebs-encryption-requirements.html
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Acknowledgment, RemovalPolicy, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IConstruct

# Customer-key EBS encryption: the principal that launches the volumes needs these.
EBS_KEY_ACTIONS: Final = ("kms:DescribeKey", "kms:ListGrants", "kms:RevokeGrant")

# (grantee, the construct holding its policy, where cdk-nag reports)
KeyUser = tuple[iam.IGrantable, IConstruct]


def local_disk_key(
    scope: Construct,
    construct_id: str,
    *,
    cluster_name: str,
    users: tuple[KeyUser, ...],
    removal_policy: RemovalPolicy,
) -> kms.Key:
    """The key, created in ``scope`` (its logical ID is the cluster's
    ``<scope>LocalDiskKey``), usable by each of ``users`` for EBS and local disks."""
    key = kms.Key(
        scope,
        construct_id,
        description=f"Encrypts local and EBS disks of EMR cluster {cluster_name}",
        enable_key_rotation=True,
        removal_policy=removal_policy,
    )
    for grantee, holder in users:
        key.grant_encrypt_decrypt(grantee)
        key.grant(grantee, *EBS_KEY_ACTIONS)
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="EbsKeyGrantsForAwsServices",
                actions=["kms:CreateGrant"],
                resources=[key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": True}},
            )
        )
        for action in ("kms:ReEncrypt*", "kms:GenerateDataKey*"):
            Validations.of(holder).acknowledge(
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Action::{action}]",
                    reason=f"{action} comes from CDK's encrypt/decrypt grant on this "
                    "cluster's own disk key (EBS re-encrypts and generates data keys "
                    "without plaintext); the statement names that one key.",
                )
            )
    return key
