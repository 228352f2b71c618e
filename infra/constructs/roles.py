"""IAM for one instance: the EMR service role and the job role (the EC2
instance profile role every Spark process on the cluster runs as).

The job role starts empty. Each construct that owns a resource grants the job
its part (``buckets.grant_job(role)``, ``catalog.grant_job(role)``...), with the
cdk-nag acknowledgments those grants need, so a permission and its reason live
beside the resource. Nothing is granted by name pattern that could also match
a neighbour instance.

What the nodes need to boot (bootstrap scripts, the job's files, the log
prefix, the disk key, the TLS zip) goes to :attr:`Roles.boot` instead, a
policy of its own on the job role that references nothing slow to create:
grants to the role land in its DefaultPolicy, which references the failure
topic and so waits for the MSK cluster (tens of minutes). The cluster waits
for every policy of both roles (:attr:`Roles.policies`), because CloudFormation
orders resources only by ``Ref``, ``Fn::GetAtt`` and ``DependsOn``
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html)
and the cluster references only the instance profile and the role names.
"""

from __future__ import annotations

from dataclasses import dataclass

import jsii
from aws_cdk import Acknowledgment, Aws, CfnResource, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct


@jsii.implements(iam.IPrincipal)
class PolicyGrantee:
    """A grantee whose grants land in ``policy`` (attached to ``role``), not in
    the role's DefaultPolicy: ``bucket.grant_read(grantee)`` then adds its
    statement to that one policy. cdk-nag reports its findings on ``policy``."""

    def __init__(self, role: iam.IRole, policy: iam.Policy) -> None:
        self.role = role
        self.policy = policy

    @property
    def grant_principal(self) -> iam.IPrincipal:
        return self

    @property
    def assume_role_action(self) -> str:
        return self.role.assume_role_action

    @property
    def policy_fragment(self) -> iam.PrincipalPolicyFragment:
        return self.role.policy_fragment

    @property
    def principal_account(self) -> str | None:
        return self.role.principal_account

    def add_to_principal_policy(
        self, statement: iam.PolicyStatement
    ) -> iam.AddToPrincipalPolicyResult:
        self.policy.add_statements(statement)
        return iam.AddToPrincipalPolicyResult(statement_added=True, policy_dependable=self.policy)


@dataclass(frozen=True)
class RolesProps:
    instance_id: str


class Roles(Construct):
    """Exposes ``service_role``, ``job_role``, ``instance_profile`` and ``boot``
    (the grantee of the job role's boot policy, ``boot.policy``)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: RolesProps) -> None:
        super().__init__(scope, construct_id)
        self.job_role = iam.Role(
            self,
            "JobRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"Spark job and EMR nodes of streaming instance {props.instance_id}",
        )
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.job_role)
        self.service_role = service_role(
            self,
            "ServiceRole",
            "elasticmapreduce.amazonaws.com",
            f"EMR service role of streaming instance {props.instance_id}",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(
                    "service-role/AmazonEMRServicePolicy_v2"
                )
            ],
        )
        Validations.of(self.service_role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                "service-role/AmazonEMRServicePolicy_v2]",
                reason="The EMR service role needs the EC2 fleet, network and cluster actions "
                "AWS maintains in AmazonEMRServicePolicy_v2, which only acts on resources "
                "tagged for-use-with-amazon-emr-managed-policies; a hand copy would drift.",
            )
        )
        # EMR launches the nodes with the instance profile: it must be allowed to pass it.
        self.job_role.grant_pass_role(self.service_role)
        self.boot = PolicyGrantee(
            self.job_role, iam.Policy(self, "BootPolicy", roles=[self.job_role])
        )

    @property
    def job_policies(self) -> list[iam.Policy]:
        """Every policy attached to the job role so far (its DefaultPolicy
        exists once something was granted to the role): what the job's step
        must wait for."""
        return [self.boot.policy, *_default_policy(self.job_role)]

    @property
    def policies(self) -> list[iam.Policy]:
        """Every policy attached to the job role and the service role so far:
        what the cluster must wait for."""
        return [*self.job_policies, *_default_policy(self.service_role)]


def _default_policy(role: iam.Role) -> list[iam.Policy]:
    default = role.node.try_find_child("DefaultPolicy")
    return [default] if isinstance(default, iam.Policy) else []


def depend_on_policy_only(function: lambda_.Function, role: iam.Role) -> None:
    """Make ``function`` wait for ``role``'s DefaultPolicy (the grants it runs
    with) and nothing else: CDK also makes it depend on the role it already
    references by ``Fn::GetAtt``, a redundant ``DependsOn`` cfn-lint reports
    (W3005)."""
    function_resource = function.node.default_child
    policy = role.node.try_find_child("DefaultPolicy")
    policy_resource = policy.node.default_child if policy is not None else None
    if isinstance(function_resource, CfnResource) and isinstance(policy_resource, CfnResource):
        function_resource.add_override("DependsOn", [policy_resource.logical_id])


def service_role(
    scope: Construct,
    construct_id: str,
    service: str,
    description: str,
    *,
    managed_policies: list[iam.IManagedPolicy] | None = None,
) -> iam.Role:
    """A role an AWS service assumes on this account's behalf only: the
    ``aws:SourceAccount`` condition keeps another account's use of the same
    service from assuming it (the confused-deputy guard:
    https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html)."""
    return iam.Role(
        scope,
        construct_id,
        assumed_by=iam.ServicePrincipal(
            service, conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
        ),
        description=description,
        managed_policies=managed_policies,
    )
