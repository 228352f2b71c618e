"""Read a whole failure topic back: every record, from offset 0 to the high watermark.

The job's Kafka producer is idempotent, but a batch that is replayed after a
crash sends its failure records again, so the topic may hold a record more
than once. Consumers de-duplicate by key (the source coordinates), and so does
this reader: it reports raw records, distinct keys and counts by reason header.

Partitions are assigned explicitly (no consumer group): a group join adds
seconds and, on tansu, sometimes delivers nothing; a reader that must see
*everything* wants offsets it controls. tansu 0.6 reports the high watermark
as the base offset of the last record batch + 1 (Kafka: last offset + 1), so
the watermark is only a lower bound here: the reader goes past it and stops
once a poll comes back empty.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from model.failure_limits import DEFAULT_MAX_MESSAGE_BYTES, FailureLimits
from model.record import REASON_HEADER
from producer.topic_end import END_OF_PARTITION, END_OF_PARTITION_CONFIG, PartitionEnds

_POLL_SEC: Final = 0.5


@dataclass
class TopicContents:
    topic: str
    records: int = 0
    reasons_by_key: dict[str, list[str]] = field(default_factory=dict)
    # The headers (decoded) and value of the last record read for each key.
    headers_by_key: dict[str, dict[str, str]] = field(default_factory=dict)
    values_by_key: dict[str, bytes] = field(default_factory=dict)

    @property
    def keys(self) -> set[str]:
        return set(self.reasons_by_key)

    def reason_of(self, key: str) -> str:
        """The reason of a key; a key re-sent with another reason is an error upstream."""
        reasons = set(self.reasons_by_key[key])
        return reasons.pop() if len(reasons) == 1 else "|".join(sorted(reasons))

    def counts_by_reason(self) -> dict[str, int]:
        """Distinct keys per reason."""
        return dict(sorted(Counter(self.reason_of(k) for k in self.reasons_by_key).items()))


def _decode(raw: bytes | str | None) -> str:
    if raw is None:
        return ""
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="replace")
    return raw


def read_topic(bootstrap: str, topic: str, *, timeout: float = 30.0) -> TopicContents:
    """Every record of ``topic`` as of now; raises TimeoutError past ``timeout``."""
    deadline = time.monotonic() + timeout
    consumer: Any = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "app-local-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **END_OF_PARTITION_CONFIG,
            "socket.timeout.ms": 10_000,
            "session.timeout.ms": 10_000,
            "log_level": 3,
        }
    )
    contents = TopicContents(topic)
    try:
        metadata = consumer.list_topics(topic, timeout=min(10.0, timeout))
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            raise KafkaException(f"topic {topic}: {found.error if found else 'absent'}")
        ends: dict[int, int] = {}
        for partition in found.partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=max(1.0, deadline - time.monotonic())
            )
            if high > low:
                ends[partition] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        positions = dict.fromkeys(ends, -1)
        at_end = PartitionEnds(ends)
        # Not a poll: every turn consumes (consumer.poll blocks up to _POLL_SEC);
        # the deadline bounds the whole read, the watermark calls above included.
        while not at_end.reached(ends):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"read_topic({topic}): {contents.records} records read, "
                    f"positions {positions} < ends {ends} after {timeout:.0f}s"
                )
            message = consumer.poll(_POLL_SEC)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() != END_OF_PARTITION:
                    raise KafkaException(message.error())
                # Empty polls are no end (producer.topic_end says why); this event may be.
                partition = message.partition()
                at_end.event(partition, message.offset(), positions.get(partition))
                continue
            at_end.record(message.partition())
            positions[message.partition()] = message.offset()
            _add(contents, message)
    finally:
        consumer.close()
    return contents


def _add(contents: TopicContents, message: Any) -> None:
    key = _decode(message.key())
    headers = {name: _decode(value) for name, value in (message.headers() or [])}
    contents.records += 1
    contents.reasons_by_key.setdefault(key, []).append(headers.get(REASON_HEADER, ""))
    contents.headers_by_key[key] = headers
    contents.values_by_key[key] = bytes(message.value() or b"")


def ensure_topic(
    bootstrap: str,
    topic: str,
    partitions: int = 1,
    timeout: float = 30.0,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> None:
    """Create the topic if absent (the local stand-in for the stack's MSK topic),
    with the topic config the stack derives from the same setting
    (``max.message.bytes``, :class:`model.failure_limits.FailureLimits`). tansu
    0.6 keeps that config but does not enforce it: locally the producer's
    ``message.max.bytes`` is the limit that bites."""
    admin: Any = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10_000})
    futures = admin.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=partitions,
                replication_factor=1,
                config={
                    "max.message.bytes": str(
                        FailureLimits(max_message_bytes).topic_max_message_bytes
                    )
                },
            )
        ],
        request_timeout=timeout,
    )
    for future in futures.values():
        try:
            future.result(timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
