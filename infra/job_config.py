"""InstanceConfig → JobConfig: the one mapping used by the CDK app and the local run.

The CDK stack serializes its result next to the artifact (the EMR step passes
its S3 URI); ``make run`` builds it for the emulators. Both go through this
function, so a setting declared in ``cdk.json`` reaches the job the same way
in both places.
"""

from __future__ import annotations

from infra.config import InstanceConfig
from model.config import JobConfig, KafkaSecurity, SourceFormat


def efo_consumer_name(instance: InstanceConfig) -> str:
    """The enhanced fan-out consumer the stack registers for the instance's job."""
    return f"{instance.instance_id}-job"


def source_choice(
    instance: InstanceConfig, override: SourceFormat | None = None
) -> tuple[SourceFormat, str]:
    """The Kinesis reader the instance's job runs, and why: ``override`` (the
    local run's), else the instance's ``job.source.format``, else its EMR
    release's default (emr/releases.py). ``make preflight`` prints the same."""
    release = instance.emr.release
    if override is not None:
        return override, "the local run reads the emulator with the Python source"
    if instance.job.source.format is not None:
        return instance.job.source.format, "chosen by the instance (job.source.format)"
    return release.kinesis_source, f"{release.label}'s default: {release.source_reason}"


def job_config_for(
    instance: InstanceConfig,
    *,
    checkpoint_location: str,
    kafka_bootstrap_servers: str | None = None,
    kafka_cluster_arn: str | None = None,
    kafka_security: KafkaSecurity | None = None,
    database_location: str | None = None,
    stop_marker_path: str | None = None,
    aws_endpoint_url: str | None = None,
    source_format: SourceFormat | None = None,
    failure_store_location: str | None = None,
    efo_consumer_arn: str | None = None,
) -> JobConfig:
    """The job's configuration for ``instance``.

    ``aws_endpoint_url`` points Kinesis, S3 and CloudWatch at one emulator
    (moto server) locally and is ``None`` on AWS. Exactly one of the Kafka
    bootstrap servers (local) or the MSK cluster ARN (AWS, resolved by the job
    at start) must be given; ``JobConfig.from_dict`` enforces it.
    ``failure_store_location`` is the claim-check store (the stack's
    ``s3://<data bucket>/failures/<instance>/``; None: beside the checkpoint).
    No keyword has a default of its own: ``kafka_security`` left out is the job
    model's (:class:`model.config.KafkaOptions`, ``PLAINTEXT``, the local broker's);
    the stack passes its topic's ``MSK_IAM`` (``FailureTopic.client_security``).
    ``source_format`` left out is the instance's choice or its release's default.
    ``efo_consumer_arn``: the enhanced fan-out consumer the stack owns
    (``EventStream.consumer_arn``; locally the one the harness registers), the
    job's ``source.consumer_arn``; ignored without enhanced fan-out.
    """
    fmt, reason = source_choice(instance, source_format)
    # Enhanced fan-out works with either reader: the connector's own, or
    # python-kinesis through job/sources/kinesis_efo.py (locally too, against
    # the harness's SubscribeToShard endpoint). Both subscribe through the
    # consumer named here, which the stack registers (infra/constructs/stream.py).
    efo = instance.job.source.consumer_type == "SubscribeToShard"
    # Every setting the instance chose (JobSettings, the job's own model) is
    # carried over as is; the rest is derived here. One dict through the
    # job's parser: a bad combination raises ConfigError naming the field by
    # its path in the job's file (``kafka: ...``), as the job would.
    settings = instance.job.model_dump()
    return JobConfig.from_dict(
        {
            **settings,
            "instance_id": instance.instance_id,
            "region": instance.region,
            "stream_name": instance.stream_name,
            "database": instance.database_name,
            "database_location": database_location,
            "stream_retention_hours": instance.stream.retention_hours,
            "checkpoint_location": checkpoint_location,
            "kinesis_endpoint_url": aws_endpoint_url,
            "s3_endpoint_url": aws_endpoint_url,
            "stop_marker_path": stop_marker_path,
            "failure_store_location": failure_store_location,
            "source": {
                **settings["source"],
                "format": fmt,
                "format_reason": reason,
                "consumer_type": "SubscribeToShard" if efo else "GetRecords",
                "consumer_name": efo_consumer_name(instance) if efo else None,
                # The stack's consumer: the job uses it and never registers one, so a
                # restart cannot leave a second consumer billing.
                "consumer_arn": efo_consumer_arn if efo else None,
            },
            "kafka": {
                "topic": instance.failure_topic_name,
                "bootstrap_servers": kafka_bootstrap_servers,
                "cluster_arn": kafka_cluster_arn,
                **({"security": kafka_security} if kafka_security is not None else {}),
                # One setting for the producer and the topic (model/failure_limits.py).
                "max_message_bytes": instance.kafka.max_message_bytes,
            },
            "metrics": {"endpoint_url": aws_endpoint_url},
        }
    )
