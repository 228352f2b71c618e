"""The failure-topic reader over a fake consumer: where a read ends, what a record carries."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import pytest

from scripts.reprocess.kafka import (
    FailureTopicReader,
    KafkaReadError,
    Topic,
    consumer_config,
    to_record,
)
from scripts.reprocess.plan import Selection

TOPIC = Topic("b:9092", "PLAINTEXT", "eu-west-1", "streaming.orders.eu-west-1.failures", "orders")


class Message:
    def __init__(
        self,
        partition: int,
        offset: int,
        ts: int = 1_000,
        *,
        key: bytes | None = b"s/shardId-0/1",
        headers: list[tuple[str, bytes | None]] | None = None,
        ts_type: int = 1,
        error: Any = None,
    ) -> None:
        self._partition, self._offset, self._ts, self._ts_type = partition, offset, ts, ts_type
        self._key = key
        default: list[tuple[str, bytes | None]] = [("reason", b"malformed_json")]
        self._headers = headers if headers is not None else default
        self._error = error

    def error(self) -> Any:
        return self._error

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes:
        return b"{"

    def headers(self) -> list[tuple[str, bytes | None]]:
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        return self._ts_type, self._ts


class EndOfPartition:
    """librdkafka's end-of-partition event (``enable.partition.eof``)."""

    def code(self) -> int:
        return -191

    def __str__(self) -> str:
        return "Broker: No more messages"


def eof(partition: int, offset: int) -> Message:
    """The event a consumer polls when its fetch at ``offset`` came back empty."""
    return Message(partition, offset, error=EndOfPartition())


class FakeConsumer:
    """Delivers a script of messages and Nones (empty polls), then Nones forever."""

    def __init__(self, script: Sequence[Message | None]) -> None:
        self.script = deque(script)
        self.polls = 0
        self.paused: list[int] = []
        self.assigned: list[tuple[int, int]] = []

    def assign(self, tps: list[Any]) -> None:
        self.assigned = [(tp.partition, tp.offset) for tp in tps]

    def pause(self, tps: list[Any]) -> None:
        self.paused.extend(tp.partition for tp in tps)

    def unassign(self) -> None:
        self.assigned = []

    def poll(self, _timeout: float) -> Message | None:
        self.polls += 1
        return self.script.popleft() if self.script else None


def read(
    script: Sequence[Message | None], starts: dict[int, int], high: dict[int, int], **kw: Any
) -> tuple[list[tuple[int, int]], FakeConsumer]:
    consumer = FakeConsumer(script)
    reader = FailureTopicReader(TOPIC, "reprocess-orders", consumer=consumer)
    selection = kw.pop("selection", Selection())
    got = [(r.partition, r.offset) for r in reader.records(starts, high, selection, **kw)]
    return got, consumer


def test_a_read_waits_for_the_records_below_the_watermark() -> None:
    # Two empty polls first (the fetch is not back yet): not the end, 0:0..0:2 are due.
    script = [None, None, Message(0, 0), Message(0, 1), None, Message(0, 2), eof(0, 3)]
    got, consumer = read(script, {0: 0}, {0: 3})
    assert got == [(0, 0), (0, 1), (0, 2)]
    assert consumer.polls == len(script), "ends at the end of the partition, at once"
    assert consumer.assigned == [], "unassigned at the end"


def test_a_read_goes_past_a_watermark_that_is_only_a_lower_bound() -> None:
    # tansu: high watermark 1 although the batch holds offsets 0..3.
    script = [Message(0, 0), Message(0, 1), Message(0, 2), Message(0, 3), eof(0, 4)]
    got, _ = read(script, {0: 0}, {0: 1})
    assert got == [(0, 0), (0, 1), (0, 2), (0, 3)]


def test_quiet_polls_past_the_watermark_do_not_end_a_read() -> None:
    # tansu under load: the watermark (1) is passed, the rest of the partition
    # comes seconds later. Two quiet polls once ended the read here and lost 0:2.
    script = [Message(0, 0), Message(0, 1), None, None, None, Message(0, 2), eof(0, 3)]
    got, _ = read(script, {0: 0}, {0: 1})
    assert got == [(0, 0), (0, 1), (0, 2)]


def test_an_end_of_partition_below_the_watermark_or_the_read_is_not_the_end() -> None:
    script = [eof(0, 0), Message(0, 0), eof(0, 1), Message(0, 1), eof(0, 2)]
    got, consumer = read(script, {0: 0}, {0: 2})
    assert got == [(0, 0), (0, 1)]
    assert consumer.polls == len(script)


def test_a_read_with_no_end_of_partition_fails_instead_of_ending_short() -> None:
    with pytest.raises(KafkaReadError, match=r"nothing from partitions \[0\] for 3 polls"):
        read([Message(0, 5)], {0: 5}, {0: 6}, idle_polls=3)


def test_a_partition_ends_at_its_first_record_past_to_time() -> None:
    script = [
        Message(0, 0, ts=10),
        Message(1, 0, ts=10),
        Message(0, 1, ts=99),
        Message(0, 2, ts=10),
        Message(1, 1, ts=20),
        eof(1, 2),
    ]
    got, consumer = read(script, {0: 0, 1: 0}, {0: 3, 1: 2}, selection=Selection(to_ms=50))
    assert got == [(0, 0), (1, 0), (1, 1)], "0:1 is past the end; 0:2 comes after it"
    assert consumer.paused == [0]


def test_a_broker_error_stops_the_read() -> None:
    class Error:
        def code(self) -> int:
            return 3

        def __str__(self) -> str:
            return "UNKNOWN_TOPIC_OR_PART"

    with pytest.raises(KafkaReadError, match="UNKNOWN_TOPIC_OR_PART"):
        read([Message(0, 0, error=Error())], {0: 0}, {0: 1})


def test_a_record_carries_headers_key_and_timestamp() -> None:
    message = Message(
        2,
        41,
        ts=1_700_000_000_000,
        headers=[("reason", b"not_utf8"), ("partition_key", b"order-9"), ("message", None)],
    )
    record = to_record(message)
    assert (record.partition, record.offset, record.timestamp_ms) == (2, 41, 1_700_000_000_000)
    assert record.reason == "not_utf8"
    assert record.partition_key == "order-9"
    assert record.header("message") == ""
    assert record.coordinates == "2:41"


def test_a_record_without_key_or_timestamp_gets_them_from_its_headers_or_none() -> None:
    headers: list[tuple[str, bytes | None]] = [
        ("stream", b"s"),
        ("shard", b"shardId-1"),
        ("sequence_number", b"77"),
        ("arrival_time", b"2026-11-21T12:00:00+00:00"),
    ]
    record = to_record(Message(0, 0, key=None, headers=headers, ts_type=0))
    assert record.key == "s/shardId-1/77"
    assert record.partition_key == "s/shardId-1/77"
    assert record.timestamp_ms is None
    assert record.arrival_time == "2026-11-21T12:00:00+00:00"
    assert record.reason == ""


def test_consumer_config_takes_the_jobs_security_and_no_producer_settings() -> None:
    local = consumer_config(TOPIC, "reprocess-orders")
    assert local["security.protocol"] == "PLAINTEXT"
    assert local["group.id"] == "reprocess-orders"
    assert local["enable.auto.commit"] is False and local["enable.auto.offset.store"] is False
    assert local["enable.partition.eof"] is True, "where a read ends"
    msk = consumer_config(
        Topic("b:9098", "MSK_IAM", "eu-west-1", TOPIC.name, "orders"), "reprocess-orders"
    )
    assert msk["security.protocol"] == "SASL_SSL"
    assert msk["sasl.mechanism"] == "OAUTHBEARER"
    assert callable(msk["oauth_cb"])
    assert not {"acks", "enable.idempotence", "linger.ms"} & set(msk)
