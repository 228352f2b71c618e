"""The instance's failure topic (docs/design.md, "Incidents": failures parked in
Redis took Redis down), on a configured MSK provisioned cluster or on one
created here. The job may write this one topic (:meth:`FailureTopic.grant_job`).

``AWS::MSK::Topic`` exists only for MSK provisioned clusters on Kafka >= 3.6,
hence the version check in ``infra.config`` and no serverless option.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from aws_cdk import RemovalPolicy
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_msk as msk
from constructs import Construct

from infra.config import InstanceConfig
from infra.config_sections import KafkaConfig
from infra.constructs.instance import removal_policy, stack_output
from infra.constructs.logs_key import encrypted_log_group, retention_days
from infra.constructs.network import shared_region_stack
from model.config import KafkaOptions, KafkaSecurity
from model.failure_limits import FailureLimits, check_limits

TOPIC_LOGICAL_ID: Final = "FailureTopic"
IAM_TLS_PORT: Final = 9098  # MSK brokers' listener for IAM auth over TLS
# How the job reaches the topic: IAM over TLS, the only listener a created
# cluster enables and the one an existing cluster's owner opens
# (docs/infra.md); the job config's kafka.security (PLAINTEXT is the local broker's).
CLIENT_SECURITY: Final[KafkaSecurity] = "MSK_IAM"
HOUR_MS: Final = 3_600_000
# What a job may do on the cluster itself (connect, find its brokers, write
# idempotently: cluster-scoped in MSK IAM) and on its own topic: no cluster
# administration, no other topic (:meth:`FailureTopic.grant_job`).
JOB_CLUSTER_ACTIONS: Final = (
    "kafka-cluster:Connect",
    "kafka-cluster:DescribeCluster",
    "kafka-cluster:WriteDataIdempotently",
    "kafka:GetBootstrapBrokers",
    "kafka:DescribeCluster",
    "kafka:DescribeClusterV2",
)
JOB_TOPIC_ACTIONS: Final = ("kafka-cluster:DescribeTopic", "kafka-cluster:WriteData")


def topic_configs(config: KafkaConfig) -> dict[str, str]:
    """Topic-level Kafka configs. ``min.insync.replicas`` is the configured value
    (default 2 of 3 replicas, validated below the replication factor in
    ``infra.config``): an ``acks=all`` write needs two copies and survives one
    replica down. ``max.message.bytes`` (the largest record batch the topic
    takes) derives from ``kafka.max_message_bytes``, as the job's producer
    limit does (:class:`model.failure_limits.FailureLimits`)."""
    limits = FailureLimits(config.max_message_bytes)
    return {
        "cleanup.policy": "delete",
        "max.message.bytes": str(limits.topic_max_message_bytes),
        "min.insync.replicas": str(config.min_insync_replicas),
        "retention.ms": str(config.topic_retention_hours * HOUR_MS),
    }


def encode_configs(configs: dict[str, str]) -> str:
    """``AWS::MSK::Topic.Configs`` is a base64 string of properties-file lines:
    the format MSK's DescribeTopic returns (its example decodes to
    ``compression.type=producer`` / ``retention.ms=604800000`` lines,
    https://docs.aws.amazon.com/msk/latest/developerguide/describe-topic-cli.html)."""
    text = "".join(f"{key}={value}\n" for key, value in sorted(configs.items()))
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


@dataclass(frozen=True)
class FailureCluster:
    """What an MSK cluster for failure topics is made of, whether an instance
    creates its own or a region's shared stack creates the shared one."""

    name: str
    config: KafkaConfig
    vpc: ec2.IVpc
    subnets: tuple[ec2.ISubnet, ...]
    removal_policy: RemovalPolicy
    # The only retention the cluster has: its brokers' log group's.
    broker_log_days: int


def add_failure_cluster(
    scope: Construct, spec: FailureCluster
) -> tuple[ec2.SecurityGroup, logs.LogGroup, msk.CfnCluster]:
    """The MSK cluster failure topics live on, its brokers' security group and
    log group, created as children of ``scope`` (an instance's ``Failures``
    or a region's shared stack: the construct ids, hence an instance's pinned
    logical ids, do not change). IAM auth over TLS only, in-cluster TLS,
    broker logs to an encrypted group, ``config.enhanced_monitoring``."""
    security_group = ec2.SecurityGroup(
        scope,
        "BrokerSecurityGroup",
        vpc=spec.vpc,
        description=f"MSK brokers of {spec.name}: IAM/TLS clients only",
        allow_all_outbound=False,
    )
    log_group = encrypted_log_group(
        scope,
        "BrokerLogs",
        what=f"MSK cluster {spec.name}'s broker logs",
        retention=retention_days(spec.broker_log_days),
        removal_policy=spec.removal_policy,
    )
    cluster = msk.CfnCluster(
        scope,
        "Cluster",
        cluster_name=spec.name,
        kafka_version=spec.config.version,
        number_of_broker_nodes=spec.config.broker_count,
        broker_node_group_info=msk.CfnCluster.BrokerNodeGroupInfoProperty(
            client_subnets=[subnet.subnet_id for subnet in spec.subnets],
            instance_type=spec.config.broker_instance_type,
            security_groups=[security_group.security_group_id],
            storage_info=msk.CfnCluster.StorageInfoProperty(
                ebs_storage_info=msk.CfnCluster.EBSStorageInfoProperty(
                    volume_size=spec.config.broker_volume_gib
                )
            ),
        ),
        client_authentication=msk.CfnCluster.ClientAuthenticationProperty(
            sasl=msk.CfnCluster.SaslProperty(iam=msk.CfnCluster.IamProperty(enabled=True)),
            unauthenticated=msk.CfnCluster.UnauthenticatedProperty(enabled=False),
        ),
        encryption_info=msk.CfnCluster.EncryptionInfoProperty(
            encryption_in_transit=msk.CfnCluster.EncryptionInTransitProperty(
                client_broker="TLS", in_cluster=True
            )
        ),
        logging_info=msk.CfnCluster.LoggingInfoProperty(
            broker_logs=msk.CfnCluster.BrokerLogsProperty(
                cloud_watch_logs=msk.CfnCluster.CloudWatchLogsProperty(
                    enabled=True, log_group=log_group.log_group_name
                )
            )
        ),
        enhanced_monitoring=spec.config.enhanced_monitoring,
    )
    cluster.apply_removal_policy(spec.removal_policy)
    return security_group, log_group, cluster


@dataclass(frozen=True)
class FailureTopicProps:
    topic_name: str
    # The cluster the instance creates when its config names no other; its
    # ``config`` (the instance's ``kafka``) also sets the topic's partitions and limits.
    cluster: FailureCluster
    # The instance's Region (for ``config.shared``: whose shared cluster).
    region: str

    @classmethod
    def of(
        cls, instance: InstanceConfig, vpc: ec2.IVpc, subnets: tuple[ec2.ISubnet, ...]
    ) -> FailureTopicProps:
        """The instance's topic, on a cluster named like its stack (when created)."""
        cluster = FailureCluster(
            instance.stack_name,
            instance.kafka,
            vpc,
            subnets,
            removal_policy(instance),
            instance.retention.broker_log_days,
        )
        return cls(instance.failure_topic_name, cluster, instance.region)


class FailureTopic(Construct):
    """Exposes ``topic``, ``topic_name``, ``topic_arn``, ``cluster_arn``,
    ``client_security`` (the job's ``kafka.security``) and, when it created the
    cluster, ``cluster`` and ``security_group`` (clients are let in with
    :meth:`allow_clients`, the job's role with :meth:`grant_job`). Outputs
    ``FailureTopicArn`` and ``MskClusterArn`` (not on the shared cluster: that
    is ``Streaming-shared-<region>``'s output)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: FailureTopicProps) -> None:
        super().__init__(scope, construct_id)
        config = props.cluster.config
        self.cluster: msk.CfnCluster | None = None
        self.security_group: ec2.SecurityGroup | None = None
        if config.cluster_arn is not None:
            self.cluster_arn = config.cluster_arn
        elif config.shared:
            self.cluster_arn = shared_region_stack(self, props.region).shared_cluster_arn
        else:
            self.cluster_arn = self._create_cluster(props)
        self.topic_name = props.topic_name
        configs = topic_configs(config)
        self.topic = msk.CfnTopic(
            self,
            "Topic",
            cluster_arn=self.cluster_arn,
            topic_name=props.topic_name,
            partition_count=config.topic_partitions,
            replication_factor=config.topic_replication_factor,
            configs=encode_configs(configs),
        )
        # What the topic takes, for the synth check against the job's producer.
        self.max_message_bytes = int(configs["max.message.bytes"])
        self.topic.override_logical_id(TOPIC_LOGICAL_ID)
        self.topic.apply_removal_policy(props.cluster.removal_policy)
        self.topic_arn = self.topic.attr_topic_arn
        self.client_security = CLIENT_SECURITY
        stack_output(self, "FailureTopicArn", self.topic_arn)
        if not config.shared:
            # A shared cluster's ARN is the shared stack's own MskClusterArn
            # output (an output re-exporting an import is what cfn-lint W6001
            # warns against).
            stack_output(self, "MskClusterArn", self.cluster_arn)

    def _create_cluster(self, props: FailureTopicProps) -> str:
        created = add_failure_cluster(self, props.cluster)
        self.security_group, self.broker_log_group, self.cluster = created
        return self.cluster.attr_arn

    def allow_clients(self, peers: Iterable[ec2.ISecurityGroup]) -> None:
        """Let ``peers`` reach the brokers' IAM/TLS listener (created cluster only;
        an existing cluster's security group is managed by its owner)."""
        if self.security_group is None:
            return
        for peer in peers:
            self.security_group.add_ingress_rule(
                peer, ec2.Port.tcp(IAM_TLS_PORT), "Kafka clients (IAM auth over TLS)"
            )

    def check_producer(self, producer: KafkaOptions, *, instance_id: str) -> None:
        """Refuse a job producer whose message limit differs from the topic's:
        both derive from one setting, and a drift would make every large
        failure fail its batch (model/failure_limits.py)."""
        check_limits(
            producer_message_max_bytes=producer.max_message_bytes,
            topic_max_message_bytes=self.max_message_bytes,
            field=f"{instance_id}: kafka.max_message_bytes",
        )

    def grant_job(self, role: iam.IRole) -> None:
        """Connect to the cluster, find its brokers, and describe/write this topic.
        ``WriteDataIdempotently`` is cluster-scoped in MSK IAM: the producer is
        idempotent (``acks=all``)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="FailureClusterConnect",
                actions=list(JOB_CLUSTER_ACTIONS),
                resources=[self.cluster_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="FailureTopicWrite",
                actions=list(JOB_TOPIC_ACTIONS),
                resources=[self.topic_arn],
            )
        )
