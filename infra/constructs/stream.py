"""The instance's Kinesis stream: named by the contract, encrypted, sized by
config, and what the job may do with it (:meth:`EventStream.grant_job`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from constructs import Construct

from infra.config import InstanceConfig
from infra.config_sections import StreamConfig
from infra.constructs.instance import removal_policy, stack_output
from infra.job_config import efo_consumer_name
from model.config import ConsumerType

# Pinned: a changed logical ID would replace the stream and lose its data.
STREAM_LOGICAL_ID: Final = "EventsStream"


@dataclass(frozen=True)
class EventStreamProps:
    stream_name: str
    config: StreamConfig
    removal_policy: RemovalPolicy
    # The enhanced fan-out consumer the stack registers (SubscribeToShard
    # instances only; infra.job_config.efo_consumer_name).
    consumer_name: str | None = None

    @classmethod
    def of(cls, instance: InstanceConfig) -> EventStreamProps:
        efo = instance.job.source.consumer_type == "SubscribeToShard"
        return cls(
            instance.stream_name,
            instance.stream,
            removal_policy(instance),
            efo_consumer_name(instance) if efo else None,
        )


class EventStream(Construct):
    """Exposes ``stream`` (output ``StreamName``); :meth:`grant_job` lets the job read it. Encrypted
    with the AWS managed ``aws/kinesis`` key: access is decided by the role's
    Kinesis permissions alone, which are per-instance, and the key costs
    nothing per stream.

    With enhanced fan-out (``consumer_name``) the stack owns the consumer:
    ``AWS::Kinesis::StreamConsumer``
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-kinesis-streamconsumer.html),
    exposed as ``consumer_arn`` (its ``ConsumerARN``, which reaches the job in
    its config, ``source.consumer_arn``; the job describes it and never
    registers one). It is deleted with the stack whatever the instance's
    removal policy: it holds no data, and a consumer bills per consumer-shard
    hour while it is registered (https://aws.amazon.com/kinesis/data-streams/pricing/),
    so one left behind by a RETAIN destroy would bill for nothing. None
    without enhanced fan-out."""

    def __init__(self, scope: Construct, construct_id: str, *, props: EventStreamProps) -> None:
        super().__init__(scope, construct_id)
        config = props.config
        self.stream = kinesis.Stream(
            self,
            "Stream",
            stream_name=props.stream_name,
            stream_mode=(
                kinesis.StreamMode.ON_DEMAND if config.on_demand else kinesis.StreamMode.PROVISIONED
            ),
            shard_count=config.shard_count,
            retention_period=Duration.hours(config.retention_hours),
            encryption=kinesis.StreamEncryption.MANAGED,
            removal_policy=props.removal_policy,
        )
        cfn = self.stream.node.default_child
        if isinstance(cfn, kinesis.CfnStream):
            cfn.override_logical_id(STREAM_LOGICAL_ID)
        stack_output(self, "StreamName", self.stream.stream_name)
        self.consumer: kinesis.CfnStreamConsumer | None = None
        self.consumer_arn: str | None = None
        if props.consumer_name is not None:
            self.consumer = kinesis.CfnStreamConsumer(
                self,
                "FanOutConsumer",
                consumer_name=props.consumer_name,
                stream_arn=self.stream.stream_arn,
            )
            self.consumer.apply_removal_policy(RemovalPolicy.DESTROY)
            self.consumer_arn = self.consumer.attr_consumer_arn
            stack_output(self, "FanOutConsumerArn", self.consumer_arn)

    def grant_job(self, role: iam.IRole, *, consumer_type: ConsumerType) -> None:
        """Read this stream; with enhanced fan-out (``SubscribeToShard``) also
        describe consumers of this stream and subscribe through them.

        The stack owns the consumer (``consumer_arn``); the ``python-kinesis``
        reader only describes it by ARN (``job.sources.kinesis_consumer.
        ensure_consumer``). The permissions stay the ones AWS lists for an
        enhanced fan-out consumer application, RegisterStreamConsumer on the
        stream and DescribeStreamConsumer and SubscribeToShard on
        ``stream/NAME/consumer/*``
        (https://docs.aws.amazon.com/streams/latest/dev/kcl-iam-permissions.html),
        scoped to this instance's stream: the ``aws-kinesis`` connector takes
        its consumer by name (``kinesis.consumerName``) and registers it when
        it does not find it, so it finds the stack's. The job never
        deregisters or lists consumers, so it may not."""
        self.stream.grant_read(role)
        if consumer_type != "SubscribeToShard":
            return
        stream_arn = self.stream.stream_arn
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="OwnStreamConsumerRegistration",
                actions=["kinesis:RegisterStreamConsumer"],
                resources=[stream_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="OwnStreamConsumers",
                actions=["kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"],
                resources=[f"{stream_arn}/consumer/*"],
            )
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{STREAM_LOGICAL_ID}.Arn>/consumer/*]",
                reason="Enhanced fan-out consumer ARNs end in a creation timestamp unknown at "
                "synth time; the wildcard covers consumers of this instance's stream only.",
            )
        )
