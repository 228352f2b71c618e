"""IAM for one instance: the EMR service role and the job role (the EC2
instance profile role every Spark process on the cluster runs as).

The job role starts empty; the stack grants it exactly the instance's own
stream, bucket prefixes, Glue database and failure topic through the methods
here or the resources' ``grant_*``. Nothing is granted by name pattern that
could also match a neighbour instance.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, Aws, Validations
from aws_cdk import aws_iam as iam
from constructs import Construct

GLUE_READ_ACTIONS = (
    "glue:GetDatabase",
    "glue:GetTable",
    "glue:GetTables",
    "glue:GetPartition",
    "glue:GetPartitions",
    "glue:BatchGetPartition",
)
GLUE_WRITE_ACTIONS = (
    "glue:CreateTable",
    "glue:UpdateTable",
    "glue:DeleteTable",
    "glue:CreatePartition",
    "glue:BatchCreatePartition",
    "glue:UpdatePartition",
    "glue:BatchUpdatePartition",
    "glue:DeletePartition",
    "glue:BatchDeletePartition",
)


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

    def allow_glue_database(
        self, *, catalog_arn: str, database_arn: str, tables_arn: str, default_database_arn: str
    ) -> None:
        """Read/write this instance's database and its tables only. The Hive client
        also reads the ``default`` database at start-up (never writes it)."""
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="OwnGlueDatabase",
                actions=[*GLUE_READ_ACTIONS, *GLUE_WRITE_ACTIONS],
                resources=[catalog_arn, database_arn, tables_arn],
            )
        )
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DefaultDatabaseLookup",
                actions=["glue:GetDatabase"],
                resources=[catalog_arn, default_database_arn],
            )
        )

    def allow_failure_topic(self, *, cluster_arn: str, topic_arn: str) -> None:
        """Connect to the cluster, find its brokers, and describe/write one topic.
        ``WriteDataIdempotently`` is cluster-scoped in MSK IAM: the producer is
        idempotent (``acks=all``)."""
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="FailureClusterConnect",
                actions=[
                    "kafka-cluster:Connect",
                    "kafka-cluster:DescribeCluster",
                    "kafka-cluster:WriteDataIdempotently",
                    "kafka:GetBootstrapBrokers",
                    "kafka:DescribeCluster",
                    "kafka:DescribeClusterV2",
                ],
                resources=[cluster_arn],
            )
        )
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="FailureTopicWrite",
                actions=["kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"],
                resources=[topic_arn],
            )
        )

    def allow_metrics(self, *, namespace: str) -> None:
        """``PutMetricData`` has no resource-level permissions; the namespace
        condition is the only scope IAM offers."""
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PutMetricsInProductNamespace",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
            )
        )

    def allow_stream_consumer(self, *, stream_arn: str) -> None:
        """Enhanced fan-out (``SubscribeToShard``): register and use consumers
        of this stream only."""
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="OwnStreamConsumerRegistration",
                actions=[
                    "kinesis:RegisterStreamConsumer",
                    "kinesis:DeregisterStreamConsumer",
                    "kinesis:ListStreamConsumers",
                ],
                resources=[stream_arn],
            )
        )
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="OwnStreamConsumers",
                actions=["kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"],
                resources=[f"{stream_arn}/consumer/*"],
            )
        )

    def allow_object_read(self, *, bucket: str, key: str) -> None:
        """One object outside the instance's buckets (the TLS certificate zip)."""
        self.job_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadTlsCertificates",
                actions=["s3:GetObject"],
                resources=[f"arn:{Aws.PARTITION}:s3:::{bucket}/{key}"],
            )
        )

    def acknowledge(self, finding: str, reason: str) -> None:
        """Acknowledge one cdk-nag finding on the job role's policy (where it is raised)."""
        Validations.of(self.job_role).acknowledge(Acknowledgment(id=finding, reason=reason))
