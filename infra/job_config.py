"""InstanceConfig → JobConfig: the one mapping used by the CDK app and the local run.

The CDK stack serializes its result next to the artifact (the EMR step passes
its S3 URI); ``make run`` builds it for the emulators. Both go through this
function, so a setting declared in ``cdk.json`` reaches the job the same way
in both places.
"""

from __future__ import annotations

from app.config import (
    JobConfig,
    KafkaOptions,
    KafkaSecurity,
    MetricsOptions,
    SourceFormat,
    SourceOptions,
)
from infra.config import InstanceConfig


def efo_consumer_name(instance: InstanceConfig) -> str:
    """The enhanced fan-out consumer registered for the instance's job."""
    return f"{instance.instance_id}-job"


def job_config_for(
    instance: InstanceConfig,
    *,
    checkpoint_location: str,
    kafka_bootstrap_servers: str | None = None,
    kafka_cluster_arn: str | None = None,
    kafka_security: KafkaSecurity = "MSK_IAM",
    database_location: str | None = None,
    stop_marker_path: str | None = None,
    aws_endpoint_url: str | None = None,
    source_format: SourceFormat = "aws-kinesis",
) -> JobConfig:
    """The job's configuration for ``instance``.

    ``aws_endpoint_url`` points Kinesis, S3 and CloudWatch at one emulator
    (moto server) locally and is ``None`` on AWS. Exactly one of the Kafka
    bootstrap servers (local) or the MSK cluster ARN (AWS, resolved by the job
    at start) must be given; ``JobConfig.from_dict`` enforces it.
    """
    source = instance.job.source
    # Enhanced fan-out needs the JVM connector's HTTP/2 push (EMR only); the
    # Python source reads the same stream with GetRecords.
    efo = source.consumer_type == "SubscribeToShard" and source_format == "aws-kinesis"
    config = JobConfig(
        instance_id=instance.instance_id,
        region=instance.region,
        stream_name=instance.stream_name,
        database=instance.database_name,
        database_location=database_location,
        checkpoint_location=checkpoint_location,
        trigger_interval_sec=instance.job.trigger_interval_sec,
        kinesis_endpoint_url=aws_endpoint_url,
        s3_endpoint_url=aws_endpoint_url,
        stop_marker_path=stop_marker_path,
        source=SourceOptions(
            format=source_format,
            starting_position=source.starting_position,
            max_fetch_records_per_shard=source.max_fetch_records_per_shard,
            max_fetch_time_per_shard_sec=source.max_fetch_time_per_shard_sec,
            describe_shard_interval_sec=source.describe_shard_interval_sec,
            consumer_type="SubscribeToShard" if efo else "GetRecords",
            consumer_name=efo_consumer_name(instance) if efo else None,
        ),
        kafka=KafkaOptions(
            topic=instance.failure_topic_name,
            bootstrap_servers=kafka_bootstrap_servers,
            cluster_arn=kafka_cluster_arn,
            security=kafka_security,
        ),
        metrics=MetricsOptions(endpoint_url=aws_endpoint_url),
    )
    # Round-trip through the validating parser: the same checks as a file read by the job.
    return JobConfig.from_dict(config.to_dict())
