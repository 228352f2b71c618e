"""Failure producer: config, keys, headers, delivery checks (fake producers),
and MSK bootstrap resolution (fake kafka client)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from job.sinks.kafka import KafkaDeliveryError, ProducerCache, deliver
from model.config import KafkaOptions
from model.failure_record import record_headers, record_key
from model.kafka_settings import KafkaSettings, producer_config, resolve_bootstrap_servers
from tests.fake_clock import FakeClock
from tests.job import kafka_fakes

SETTINGS = KafkaSettings("b:9092", "topic", "PLAINTEXT", "us-east-1", "inst", 5_000, 3_000, 5)
ROW = {
    "data": b"raw",
    "stream_name": "s",
    "shard_id": "shardId-1",
    "sequence_number": "42",
    "partition_key": "pk",
    "arrival_time": datetime(2026, 1, 2, 3, 4, 5),
    "failure_reason": "malformed_json",
    "failure_message": "record is not valid JSON",
    "failure_class": "JSONDecodeError",
}


def test_producer_is_idempotent_acks_all_and_bounded() -> None:
    conf = producer_config(SETTINGS)
    assert conf["enable.idempotence"] is True
    assert conf["acks"] == "all"
    assert conf["delivery.timeout.ms"] == 5_000
    assert conf["request.timeout.ms"] == 3_000
    assert conf["security.protocol"] == "PLAINTEXT"


def test_msk_iam_uses_sasl_ssl_oauthbearer_with_a_token_callback() -> None:
    conf = producer_config(
        KafkaSettings("b:9098", "t", "MSK_IAM", "eu-west-1", "i", 30_000, 10_000, 45)
    )
    assert (conf["security.protocol"], conf["sasl.mechanism"]) == ("SASL_SSL", "OAUTHBEARER")
    assert callable(conf["oauth_cb"])


def test_key_and_headers_carry_the_source_coordinates() -> None:
    assert record_key("s", "shardId-1", "42") == "s/shardId-1/42"
    assert record_key("s", None, "42") == "s/-/42", "the JVM connector has no shard column"
    assert record_key("s", "shardId-1", "42", 0) != record_key("s", "shardId-1", "42", 1)
    assert record_key("s", "shardId-1", "42", 3) == "s/shardId-1/42/3", "a KPL user record"
    headers = dict(record_headers(ROW, "inst"))
    assert headers["reason"] == b"malformed_json"
    assert headers["exception"] == b"JSONDecodeError"
    assert headers["stream"] == b"s"
    assert headers["sequence_number"] == b"42"
    assert headers["arrival_time"] == b"2026-01-02T03:04:05+00:00"


class FakeProducer(kafka_fakes.FakeProducer):
    """Fails the delivery of the messages numbered in ``fail``; with
    ``full_once``, its local queue is full at the first produce."""

    def __init__(self, fail: set[int] | None = None, full_once: bool = False) -> None:
        super().__init__()
        self.fail = fail or set()
        self.full_once = full_once

    def refuse(self, message: dict[str, Any]) -> None:
        if self.full_once:
            self.full_once = False
            raise BufferError("queue full")

    def report(self, message: dict[str, Any], index: int) -> Any:
        return "broker down" if index in self.fail else None


def test_every_delivery_report_is_checked() -> None:
    fake = FakeProducer(fail={1})
    with pytest.raises(KafkaDeliveryError, match="1 of 3 failure records not delivered"):
        kafka_fakes.deliver_through(fake, [ROW, ROW, ROW], SETTINGS)


def test_full_local_queue_is_retried_and_all_delivered() -> None:
    fake = FakeProducer(full_once=True)
    assert kafka_fakes.deliver_through(fake, [ROW, ROW], SETTINGS) == 2
    assert [m["key"] for m in fake.sent] == [b"s/shardId-1/42"] * 2


def test_a_producer_is_kept_between_tasks_until_it_fails_or_idles() -> None:
    made: list[FakeProducer] = []
    fail_next = {"on": False}

    def factory(conf: dict[str, Any]) -> FakeProducer:
        assert conf["enable.idempotence"] is True
        made.append(FakeProducer(fail={0} if fail_next["on"] else None))
        return made[-1]

    clock = FakeClock(now=0.0)
    cache = ProducerCache(factory, idle_sec=60.0, clock=clock)
    assert deliver(iter([ROW]), SETTINGS, cache) == 1
    clock.now = 30.0
    assert deliver(iter([ROW, ROW]), SETTINGS, cache) == 2
    assert len(made) == 1, "the second task reuses the first task's producer"
    assert len(made[0].sent) == 3

    other = KafkaSettings("b:9092", "other", "PLAINTEXT", "us-east-1", "inst", 5_000, 3_000, 5)
    assert deliver(iter([ROW]), other, cache) == 1
    assert len(made) == 2, "other settings, another producer"

    clock.now = 91.0  # 61 s after the last use of SETTINGS' producer
    fail_next["on"] = True
    with pytest.raises(KafkaDeliveryError):
        deliver(iter([ROW]), SETTINGS, cache)
    assert len(made) == 3, "an idle producer is replaced"
    assert made[0].purged and made[2].purged, "replaced and failed producers are dropped"
    assert made[1].purged, "any producer idle that long goes too (a broker long gone)"
    fail_next["on"] = False
    assert deliver(iter([ROW]), SETTINGS, cache) == 1
    assert len(made) == 4, "after a failed delivery the next task starts a new producer"


class FakeKafkaClient:
    def __init__(self, brokers: dict[str, str]) -> None:
        self.brokers = brokers
        self.asked: list[str] = []

    def get_bootstrap_brokers(self, ClusterArn: str) -> dict[str, str]:  # noqa: N803
        self.asked.append(ClusterArn)
        return self.brokers


def test_msk_brokers_are_resolved_from_the_cluster_arn() -> None:
    client = FakeKafkaClient({"BootstrapBrokerStringSaslIam": "b-1:9098,b-2:9098"})
    options = KafkaOptions(
        topic="t", cluster_arn="arn:aws:kafka:eu-west-1:1:cluster/c/x", security="MSK_IAM"
    )
    servers = resolve_bootstrap_servers(
        options, region="eu-west-1", client_factory=lambda **_: client
    )
    assert servers == "b-1:9098,b-2:9098"
    assert client.asked == [options.cluster_arn]
    with pytest.raises(ValueError, match="BootstrapBrokerStringSaslIam"):
        resolve_bootstrap_servers(
            options, region="eu-west-1", client_factory=lambda **_: FakeKafkaClient({})
        )


def test_bootstrap_servers_given_are_used_as_is() -> None:
    options = KafkaOptions(topic="t", bootstrap_servers="127.0.0.1:9092")
    assert resolve_bootstrap_servers(options, region="x") == "127.0.0.1:9092"
