"""The failure record size: the producer's ``message.max.bytes`` and the
topic's ``max.message.bytes`` agree, and an imported cluster's broker setting
is compared with them."""

from __future__ import annotations

from typing import Any

from infra.config import InstanceConfig
from infra.constructs.failure_topic import topic_configs
from model.config import KafkaOptions
from model.failure_limits import limit_problems
from model.kafka_settings import KafkaSettings, producer_config
from scripts.preflight.result import Clients, Result, error_text, iam_fix
from scripts.preflight.shared_cluster import failure_cluster_arn


def check_failure_message_size(config: InstanceConfig, clients: Clients) -> Result:
    """The producer's and the topic's limits, as the job and the stack derive
    them from ``kafka.max_message_bytes`` (no call), and for an imported
    cluster the broker default its configuration sets, if any (read-only
    DescribeClusterV2 and DescribeConfigurationRevision). A topic's own
    ``max.message.bytes`` overrides the broker's ``message.max.bytes``
    (https://kafka.apache.org/documentation/#topicconfigs_max.message.bytes),
    so a lower broker value is a warning: a tool that creates the topic by hand
    without the topic config would get the broker's."""
    name = "failure record size"
    field = "kafka.max_message_bytes"
    options = KafkaOptions(
        topic=config.failure_topic_name,
        bootstrap_servers="preflight",
        max_message_bytes=config.kafka.max_message_bytes,
    )
    settings = KafkaSettings.from_options(
        options, region=config.region, instance_id=config.instance_id, bootstrap_servers="-"
    )
    producer = int(producer_config(settings)["message.max.bytes"])
    topic = int(topic_configs(config.kafka)["max.message.bytes"])
    problems = limit_problems(
        producer_message_max_bytes=producer, topic_max_message_bytes=topic, field=field
    )
    detail = (
        f"producer message.max.bytes {producer:,}, topic max.message.bytes {topic:,} "
        f"(from {field} {config.kafka.max_message_bytes:,}); larger originals go to the "
        "claim-check store"
    )
    if problems:
        return Result(
            name, False, "; ".join(problems), "derive both from model.failure_limits.FailureLimits"
        )
    arn = failure_cluster_arn(config, clients)
    if arn is None:
        return Result(name, True, detail)
    return _against_the_broker(name, detail, topic, arn, clients["kafka"])


def _against_the_broker(name: str, detail: str, topic: int, arn: str, kafka: Any) -> Result:
    """The passing ``detail``, with a warning when the imported cluster's
    configuration cannot be read or sets a broker limit below the topic's."""
    broker = _broker_message_max_bytes(kafka, arn)
    if isinstance(broker, str):
        return Result(
            name,
            True,
            f"{detail}; the cluster's broker configuration could not be read: {broker}",
            f"check that {arn} takes topic configs of max.message.bytes={topic}; "
            + iam_fix("kafka:DescribeClusterV2, kafka:DescribeConfigurationRevision"),
            warn=True,
        )
    if broker is not None and broker < topic:
        return Result(
            name,
            True,
            f"{detail}; the cluster's configuration sets message.max.bytes={broker:,}, "
            "below the topic's (the topic's own setting overrides it)",
            "nothing to change for the stack's topic; a topic created by hand needs "
            f"max.message.bytes={topic}",
            warn=True,
        )
    return Result(name, True, detail)


def _broker_message_max_bytes(kafka: Any, arn: str) -> int | str | None:
    """The ``message.max.bytes`` an imported cluster's configuration sets (None:
    not set, Kafka's default applies), or why it could not be read."""
    try:
        info = kafka.describe_cluster_v2(ClusterArn=arn)["ClusterInfo"]
        software = (info.get("Provisioned") or {}).get("CurrentBrokerSoftwareInfo", {})
        configuration = software.get("ConfigurationArn")
        if not configuration:
            return None
        revision = kafka.describe_configuration_revision(
            Arn=configuration, Revision=int(software.get("ConfigurationRevision", 1))
        )
    except Exception as exc:
        return error_text(exc)
    raw = revision.get("ServerProperties", b"")
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "message.max.bytes" and value.strip().isdigit():
            return int(value.strip())
    return None
