"""CDK's own helper Lambdas, given least privilege and bounded logs.

Two Lambdas in each stack are CDK's, not this product's: the handler of the
``BucketDeployment`` uploads (every stack) and the provider that empties the
buckets before CloudFormation deletes them (``auto_delete_objects``, DESTROY
stacks only). Left as CDK makes them, both run as roles with the AWS managed
``AWSLambdaBasicExecutionRole`` (create any log group, write any log stream
of the account) and log to ``/aws/lambda/<function>``, a group Lambda creates
on first use with no retention: kept for ever.

* The upload handler gets a role of this module's making (no managed policy;
  it may write its own log group only) and a KMS-encrypted log group kept
  ``retention.function_log_days`` (``BucketDeployment`` takes both). CDK still
  adds its own S3 grants to that role (read the CDK asset bucket, read/write
  the destination bucket); job_deployment.py acknowledges them as they are.
* The auto-delete provider is a CloudFormation resource CDK renders itself
  (``CustomResourceProvider``): it takes no role or log group. Its role's
  managed policy is replaced by an inline one for its own log group, which is
  created here, ahead of the function's first run, with a retention; the
  buckets' auto-delete resources wait for both, so they outlive its last run.
"""

from __future__ import annotations

from typing import Final

from aws_cdk import Acknowledgment, CfnResource, Fn, RemovalPolicy, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.constructs.logs_key import (
    encrypted_log_group,
    log_group_arn,
    retention_days,
    stack_key,
)

AUTO_DELETE_PROVIDER_ID: Final = "Custom::S3AutoDeleteObjectsCustomResourceProvider"


class DeploymentHandlerAccess(Construct):
    """``role`` and ``log_group`` for every ``BucketDeployment`` of a stack
    (they share one handler, so they must get the same two)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy,
        log_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = encrypted_log_group(
            self,
            "Logs",
            what="CDK's BucketDeployment handler",
            retention=retention_days(log_days),
            removal_policy=removal_policy,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="CDK's BucketDeployment handler: uploads the job's files and scripts",
        )
        self.log_group.grant_write(self.role)


def scope_auto_delete_provider(
    stack: Stack, removal_policy: RemovalPolicy, *, log_days: int
) -> CfnResource | None:
    """Give the stack's auto-delete provider (if it has one) a log group with a
    retention of ``log_days`` and a role that may write only there; returns the log group
    resource (created after the role's policy), which whatever invokes the
    provider must depend on."""
    provider = stack.node.try_find_child(AUTO_DELETE_PROVIDER_ID)
    if provider is None:
        return None
    handler = provider.node.try_find_child("Handler")
    role = provider.node.try_find_child("Role")
    if not isinstance(handler, CfnResource) or not isinstance(role, CfnResource):
        raise ValueError(
            f"{AUTO_DELETE_PROVIDER_ID}: no Handler/Role CfnResource; allowed: the shape "
            "aws-cdk-lib renders (upgrade check: infra/constructs/helper_lambdas.py)"
        )
    # Lambda's default group name for the function, which it would otherwise
    # create on first use with no retention.
    name = Fn.join("", ["/aws/lambda/", handler.ref])
    key = stack_key(stack, removal_policy).for_log_group(
        name, what="CDK's bucket auto-delete provider"
    )
    log_group = logs.CfnLogGroup(
        stack,
        "AutoDeleteObjectsLogs",
        log_group_name=name,
        retention_in_days=log_days,
        kms_key_id=key.key_arn,
    )
    log_group.apply_removal_policy(removal_policy)
    group_arn = log_group_arn(name)
    role.add_property_deletion_override("ManagedPolicyArns")
    # A policy of its own, not inline in the role: the group's name names the
    # function, which names the role (an inline policy would be a cycle).
    policy = iam.CfnPolicy(
        stack,
        "AutoDeleteObjectsLogsPolicy",
        policy_name="OwnLogGroup",
        roles=[role.ref],
        policy_document={
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                    "Resource": Fn.join("", [group_arn, ":*"]),
                }
            ],
        },
    )
    log_group.add_resource_dependency(policy)  # addDependency is deprecated
    Validations.of(policy).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:"
            "<AWS::AccountId>:log-group:/aws/lambda/"
            f"<{stack.resolve(handler.logical_id)}>:*]",
            reason="The wildcard is the log streams of the auto-delete provider's own log "
            "group; Lambda names them.",
        )
    )
    return log_group
