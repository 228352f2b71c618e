"""The claim-check pattern of the failure producer: the size decision, the
pointer headers, and delivery with fake producers: a record too large for the
topic, or refused by Kafka for its size, ends up in the store and on the topic
as a pointer; a broker that is down still fails the task."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from job.sinks.kafka import KafkaDeliveryError
from model.claim_check import (
    DELIVERY_ERROR_HEADER,
    ORIGINAL_BYTES_HEADER,
    ORIGINAL_SHA256_HEADER,
    ORIGINAL_URI_HEADER,
    Pointer,
    fits_inline,
    message_size,
    object_key,
    pointer_from_headers,
    verify,
)
from model.config import ConfigError, JobConfig, KafkaOptions
from model.failure_limits import EXCERPT_BYTES, FailureLimits, FailureLimitsError
from model.failure_store import FailureStore, FailureStoreError, FailureStoreSettings
from model.kafka_settings import KafkaSettings
from tests.job.kafka_fakes import FakeProducer, deliver_through

LIMITS = FailureLimits()
ROW: dict[str, Any] = {
    "data": b"raw",
    "stream_name": "s",
    "shard_id": "shardId-000000000001",
    "sequence_number": "4960",
    "partition_key": "pk",
    "arrival_time": datetime(2026, 1, 2, 3, 4, 5),
    "failure_reason": "malformed_json",
    "failure_message": "record is not valid JSON",
    "failure_class": "JSONDecodeError",
}
# Kinesis accepts this (below 1 MiB); librdkafka's default limit does not.
BIG = 1_040_000


def row(data: bytes, sequence: str = "4960") -> dict[str, Any]:
    return {**ROW, "data": data, "sequence_number": sequence}


# ------------------------------------------------------------------ sizes


@pytest.mark.parametrize("value", [1_000, 131_071, 1_000_001, True, "1000000"])
def test_a_limit_out_of_range_names_the_field(value: Any) -> None:
    with pytest.raises(FailureLimitsError, match=r"^kafka\.max_message_bytes: bad value"):
        FailureLimits(value)
    if not isinstance(value, str | bool):
        with pytest.raises(ConfigError, match="max_message_bytes"):
            KafkaOptions(topic="t", bootstrap_servers="b:1", max_message_bytes=value)


def test_the_size_decision_counts_key_value_and_headers() -> None:
    headers = [("reason", b"x" * 10)]
    size = message_size(b"k" * 5, b"v" * 100, headers)
    assert size == 5 + 100 + len("reason") + 10
    limit = LIMITS.inline_max_bytes
    assert fits_inline(limit, LIMITS)
    assert not fits_inline(limit + 1, LIMITS)


def test_object_keys_are_the_coordinates_and_cannot_leave_the_prefix() -> None:
    assert object_key("s", "shardId-1", "42") == "s/shardId-1/42"
    assert object_key("s", None, "42") == "s/-/42"
    assert object_key("../x", "a/b", "1") == "..%2Fx/a%2Fb/1"


def test_a_pointer_is_read_back_and_checked() -> None:
    data = b"original"
    digest = hashlib.sha256(data).hexdigest()
    headers = [
        ("reason", "malformed_json"),
        (ORIGINAL_URI_HEADER, "s3://b/failures/i/s/sh/1"),
        (ORIGINAL_BYTES_HEADER, str(len(data))),
        (ORIGINAL_SHA256_HEADER, digest),
    ]
    pointer = pointer_from_headers(headers)
    assert pointer == Pointer("s3://b/failures/i/s/sh/1", len(data), digest)
    verify(pointer, data)
    with pytest.raises(ValueError, match="the pointer says"):
        verify(pointer, b"originaX")
    assert pointer_from_headers([("reason", "x")]) is None
    with pytest.raises(ValueError, match="bad original_bytes"):
        pointer_from_headers([(ORIGINAL_URI_HEADER, "s3://b/k"), (ORIGINAL_BYTES_HEADER, "x")])


def test_the_store_location_defaults_to_the_checkpoint_and_is_configurable() -> None:
    base = {
        "instance_id": "i",
        "region": "r",
        "stream_name": "s",
        "database": "d",
        "checkpoint_location": "s3://data/checkpoints/i/",
        "kafka": {"topic": "t", "bootstrap_servers": "b:1"},
    }
    assert JobConfig.from_dict(base).failure_store_uri == "s3://data/checkpoints/i/_failures/"
    chosen = JobConfig.from_dict({**base, "failure_store_location": "s3://data/failures/i/"})
    assert chosen.failure_store_uri == "s3://data/failures/i/"
    settings = KafkaSettings.for_job(chosen, "b:1")
    assert settings.store == FailureStoreSettings("s3://data/failures/i/", "r", None)


# ------------------------------------------------------------------ delivery


class Refusal:
    """A confluent_kafka.KafkaError stand-in: ``code()`` and ``str``."""

    def __init__(self, code: int, text: str) -> None:
        self._code = code
        self.text = text

    def code(self) -> int:
        return self._code

    def __str__(self) -> str:
        return self.text


class KafkaLike(Exception):  # noqa: N818 (named after confluent_kafka.KafkaException)
    """confluent_kafka.KafkaException carries its KafkaError as args[0]."""


def _size(message: dict[str, Any]) -> int:
    return message_size(message["key"], message["value"], message["headers"])


class Producer(FakeProducer):
    """Refuses messages above ``local_max`` at produce time (librdkafka's check)
    and reports ``broker_max`` (by message size) or ``down`` errors."""

    def __init__(
        self, local_max: int = 1_000_000, broker_max: int | None = None, down: bool = False
    ) -> None:
        super().__init__()
        self.local_max = local_max
        self.broker_max = broker_max
        self.down = down

    def refuse(self, message: dict[str, Any]) -> None:
        if _size(message) > self.local_max:
            raise KafkaLike(Refusal(10, "Unable to produce message: Message size too large"))

    def report(self, message: dict[str, Any], index: int) -> Any:
        if self.down:
            return Refusal(-195, "Local: All broker connections are down")
        if self.broker_max is not None and _size(message) > self.broker_max:
            return Refusal(10, "Broker: Message size too large")
        return None


def settings(max_message_bytes: int = 1_000_000) -> KafkaSettings:
    return KafkaSettings("b:1", "t", "PLAINTEXT", "r", "inst", 5_000, 3_000, 5, max_message_bytes)


def run(rows: list[dict[str, Any]], producer: Producer, store: FailureStore | None) -> int:
    return deliver_through(producer, rows, settings(), store)


def headers_of(message: dict[str, Any]) -> dict[str, bytes]:
    return dict(message["headers"])


def test_a_large_original_goes_to_the_store_and_the_topic_gets_a_pointer(
    tmp_path: Path,
) -> None:
    store = FailureStore(FailureStoreSettings(str(tmp_path), "r"))
    big = os.urandom(BIG)
    producer = Producer()
    assert run([row(b"small", "1"), row(big, "2")], producer, store) == 2
    small, pointer = producer.sent
    assert small["value"] == b"small" and ORIGINAL_URI_HEADER not in headers_of(small)
    found = headers_of(pointer)
    assert found["reason"] == b"malformed_json", "the reason travels with the pointer"
    assert found[ORIGINAL_URI_HEADER] == str(tmp_path / "s/shardId-000000000001/2").encode()
    assert found[ORIGINAL_BYTES_HEADER] == str(BIG).encode()
    assert found[ORIGINAL_SHA256_HEADER] == hashlib.sha256(big).hexdigest().encode()
    assert pointer["value"] == big[:EXCERPT_BYTES]
    assert pointer["key"] == b"s/shardId-000000000001/2"
    assert message_size(pointer["key"], pointer["value"], pointer["headers"]) < 5_000
    assert (tmp_path / "s/shardId-000000000001/2").read_bytes() == big
    assert not (tmp_path / "s/shardId-000000000001/1").exists(), "small ones stay inline"


class OrderedStore(FailureStore):
    """Records when a put happened relative to the producer's sends."""

    def __init__(self, tmp: Path, producer: Producer) -> None:
        super().__init__(FailureStoreSettings(str(tmp), "r"))
        self.producer = producer
        self.sent_before_put: list[int] = []

    def put(self, key: str, data: bytes, sha256_hex: str, meta: Any) -> str:
        self.sent_before_put.append(len(self.producer.sent))
        return super().put(key, data, sha256_hex, meta)


def test_the_original_is_stored_before_its_pointer_is_sent(tmp_path: Path) -> None:
    producer = Producer()
    store = OrderedStore(tmp_path, producer)
    run([row(os.urandom(BIG), "7")], producer, store)
    assert store.sent_before_put == [0]
    assert len(producer.sent) == 1


def test_a_record_the_broker_refuses_for_its_size_is_claim_checked_after_the_fact(
    tmp_path: Path,
) -> None:
    store = FailureStore(FailureStoreSettings(str(tmp_path), "r"))
    data = os.urandom(60_000)  # inline by our limits, above the broker's 50,000
    producer = Producer(broker_max=50_000)
    assert run([row(data, "9")], producer, store) == 1
    refused, pointer = producer.sent
    assert refused["value"] == data
    found = headers_of(pointer)
    assert found[DELIVERY_ERROR_HEADER] == b"Broker: Message size too large"
    assert found[ORIGINAL_BYTES_HEADER] == b"60000"
    assert (tmp_path / "s/shardId-000000000001/9").read_bytes() == data
    meta = (tmp_path / "s/shardId-000000000001/9.metadata.json").read_text()
    assert '"reason": "malformed_json"' in meta and "Message size too large" in meta


def test_a_record_librdkafka_refuses_at_produce_is_claim_checked(tmp_path: Path) -> None:
    store = FailureStore(FailureStoreSettings(str(tmp_path), "r"))
    producer = Producer(local_max=100_000)
    assert run([row(os.urandom(200_000), "3")], producer, store) == 1
    (pointer,) = producer.sent
    assert headers_of(pointer)[DELIVERY_ERROR_HEADER].startswith(b"Unable to produce")


def test_a_broker_that_is_down_still_fails_the_task(tmp_path: Path) -> None:
    store = FailureStore(FailureStoreSettings(str(tmp_path), "r"))
    with pytest.raises(KafkaDeliveryError, match="1 of 1 failure records not delivered"):
        run([row(b"small")], Producer(down=True), store)
    with pytest.raises(KafkaDeliveryError, match="All broker connections are down"):
        run([row(os.urandom(BIG))], Producer(down=True), store)


def test_a_pointer_the_broker_still_refuses_fails_the_task(tmp_path: Path) -> None:
    store = FailureStore(FailureStoreSettings(str(tmp_path), "r"))
    with pytest.raises(KafkaDeliveryError, match="Message size too large"):
        run([row(os.urandom(BIG))], Producer(broker_max=100), store)


def test_a_store_that_fails_fails_the_task_before_anything_is_sent(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = FailureStore(FailureStoreSettings(str(blocker), "r"))
    producer = Producer()
    with pytest.raises(FailureStoreError, match="claim-check put"):
        run([row(os.urandom(BIG))], producer, store)
    assert producer.sent == []


def test_without_a_store_a_large_record_fails_the_task_and_says_why() -> None:
    with pytest.raises(KafkaDeliveryError, match="needs the claim-check store"):
        run([row(os.urandom(BIG))], Producer(), None)
