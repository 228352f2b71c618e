"""scripts.preflight.message_size: producer and topic limits agree; an imported
cluster's lower broker limit is a warning."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from infra.constructs import failure_topic
from scripts.preflight import message_size
from tests.scripts.preflight.stubs import MSK_ARN, Stub, _config, _msk


def test_the_failure_record_size_passes_when_producer_and_topic_agree() -> None:
    result = message_size.check_failure_message_size(
        _config(kafka={"max_message_bytes": 500_000}), {}
    )
    assert result.status == "PASS"
    assert "producer message.max.bytes 500,000, topic max.message.bytes 548,588" in result.detail


def test_a_topic_below_the_producer_fails_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = failure_topic.topic_configs
    monkeypatch.setattr(
        message_size,
        "topic_configs",
        lambda config: {**real(config), "max.message.bytes": "900000"},
    )
    result = message_size.check_failure_message_size(_config(), {})
    assert result.status == "FAIL"
    assert result.detail.startswith("kafka.max_message_bytes: the producer's message.max.bytes")
    assert "model.failure_limits" in result.fix


def _configured_cluster(properties: bytes) -> Stub:
    return Stub(
        describe_cluster_v2=_msk(
            CurrentBrokerSoftwareInfo={
                "KafkaVersion": "3.6.0",
                "ConfigurationArn": "arn:aws:kafka:eu-west-1:123456789012:configuration/c/1",
                "ConfigurationRevision": 2,
            }
        ),
        describe_configuration_revision={"ServerProperties": properties},
    )


def test_an_imported_cluster_with_a_lower_broker_limit_is_a_warning() -> None:
    config = _config(kafka={"cluster_arn": MSK_ARN})
    kafka = _configured_cluster(b"auto.create.topics.enable=false\nmessage.max.bytes=500000\n")
    result = message_size.check_failure_message_size(config, {"kafka": kafka})
    assert result.status == "WARN"
    assert "sets message.max.bytes=500,000, below the topic's" in result.detail
    assert kafka.calls[-1] == (
        "describe_configuration_revision",
        {"Arn": "arn:aws:kafka:eu-west-1:123456789012:configuration/c/1", "Revision": 2},
    )
    fine = _configured_cluster(b"message.max.bytes=2000000\n")
    assert message_size.check_failure_message_size(config, {"kafka": fine}).status == "PASS"
    default = Stub(describe_cluster_v2=_msk())
    assert message_size.check_failure_message_size(config, {"kafka": default}).status == "PASS"
    denied = Stub(describe_cluster_v2=ClientError({"Error": {"Code": "AccessDenied"}}, "x"))
    unread = message_size.check_failure_message_size(config, {"kafka": denied})
    assert unread.status == "WARN" and "kafka:DescribeConfigurationRevision" in unread.fix
