"""The security-group cleanup of one EMR cluster: a custom resource whose
function (:mod:`infra.sg_cleanup.handler`, beside this construct, inlined), on
stack delete, revokes the rules EMR added between the cluster's managed
groups, which would otherwise block deleting them (DependencyViolation;
https://docs.aws.amazon.com/emr/latest/ManagementGuide/emr-man-sec-groups.html)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from aws_cdk import (
    Acknowledgment,
    Aws,
    CustomResource,
    Duration,
    RemovalPolicy,
    Validations,
)
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.config_sections import EmrConfig, RetentionConfig
from infra.constructs.logs_key import encrypted_log_group, retention_days
from infra.constructs.roles import depend_on_policy_only

# The custom resource's Lambda code, inlined (CloudFormation ZipFile, < 4 KiB).
SG_CLEANUP_SOURCE: Final = Path(__file__).with_name("handler.py")


def security_group_cleanup(
    scope: Construct,
    *,
    groups: tuple[ec2.ISecurityGroup, ...],
    config: EmrConfig,
    retention: RetentionConfig,
    removal_policy: RemovalPolicy,
) -> CustomResource:
    """The function, its role and log group, and the custom resource naming
    ``groups``, created in ``scope`` (the cluster's construct, which keeps
    their logical IDs). The cluster must depend on the result: deleted before
    the cleanup runs, created after it."""
    log_group = encrypted_log_group(
        scope,
        "SecurityGroupCleanupLogs",
        what="the EMR security group cleanup function",
        retention=retention_days(retention.function_log_days),
        removal_policy=removal_policy,
    )
    role = iam.Role(
        scope,
        "SecurityGroupCleanupRole",
        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description="Revokes EMR's rules between this cluster's managed groups on delete",
    )
    log_group.grant_write(role)
    role.add_to_principal_policy(
        iam.PolicyStatement(actions=["ec2:DescribeSecurityGroups"], resources=["*"])
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            actions=["ec2:RevokeSecurityGroupIngress", "ec2:RevokeSecurityGroupEgress"],
            resources=[
                f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}:security-group/"
                f"{group.security_group_id}"
                for group in groups
            ],
        )
    )
    Validations.of(role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::*]",
            reason="ec2:DescribeSecurityGroups has no resource-level permissions; the "
            "revoke actions are limited to this cluster's three managed groups.",
        )
    )
    function = lambda_.Function(
        scope,
        "SecurityGroupCleanup",
        # python3.14: a supported runtime (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtimes.html)
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="index.handler",
        code=lambda_.Code.from_inline(SG_CLEANUP_SOURCE.read_text(encoding="utf-8")),
        timeout=Duration.seconds(config.security_group_cleanup_timeout_sec),
        role=role,
        log_group=log_group,
        description="Revokes EMR-managed security group cross-references on delete",
    )
    depend_on_policy_only(function, role)
    return CustomResource(
        scope,
        "SecurityGroupCleanupResource",
        service_token=function.function_arn,
        resource_type="Custom::EmrSecurityGroupCleanup",
        properties={"GroupIds": [group.security_group_id for group in groups]},
    )
