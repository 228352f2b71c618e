"""IAM for one instance: the EMR service role and the job role (the EC2
instance profile role every Spark process on the cluster runs as).

The job role starts empty. Each construct that owns a resource grants the job
its part (``buckets.grant_job(role)``, ``catalog.grant_job(role)``...), with the
cdk-nag acknowledgments those grants need, so a permission and its reason live
beside the resource. Nothing is granted by name pattern that could also match
a neighbour instance.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, Aws, Validations
from aws_cdk import aws_iam as iam
from constructs import Construct


@dataclass(frozen=True)
class RolesProps:
    instance_id: str


class Roles(Construct):
    """Exposes ``service_role``, ``job_role`` and ``instance_profile``."""

    def __init__(self, scope: Construct, construct_id: str, *, props: RolesProps) -> None:
        super().__init__(scope, construct_id)
        self.job_role = iam.Role(
            self,
            "JobRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"Spark job and EMR nodes of streaming instance {props.instance_id}",
        )
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.job_role)
        self.service_role = iam.Role(
            self,
            "ServiceRole",
            assumed_by=iam.ServicePrincipal(
                "elasticmapreduce.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
            description=f"EMR service role of streaming instance {props.instance_id}",
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
