"""Read an instance's failure topic and keep the reprocess group's position.

The consumer joins no group: it assigns every partition of the topic itself
(a group join adds seconds and, on tansu, sometimes delivers nothing, see
``local.failures``) and uses the group id only to read and commit offsets
(``reprocess-<instance>`` unless ``--group``). Nothing is committed
automatically: the command commits after Kinesis accepted the records.

Where a read ends: a partition ends at its first record at or after
``--to-time`` (by default the moment the command started, so failures the
job writes while the command runs, including those of records it re-sent, wait
for the next run), or when the topic has nothing more. The high watermark is
only a lower bound of the end, so "nothing more" is the client's
end-of-partition event (:mod:`producer.topic_end` says why); quiet polls never end
a read. ``idle_polls`` quiet polls in a row with no end of partition is a
broker that stopped answering: the read fails.

Security is the job's own (``model.kafka_settings.producer_config``): PLAINTEXT
locally, SASL/OAUTHBEARER with an MSK IAM token on AWS.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka import Consumer, TopicPartition

from infra.config import InstanceConfig
from model.config import KafkaOptions, KafkaSecurity
from model.failure_record import record_key
from model.kafka_settings import KafkaSettings, producer_config, resolve_bootstrap_servers
from producer.topic_end import END_OF_PARTITION, END_OF_PARTITION_CONFIG, PartitionEnds
from scripts.reprocess.hook import FailedRecord, decode_headers, reason_of
from scripts.reprocess.plan import Selection

# Keys of the job's producer config that say how to reach the brokers (the rest
# is producer-only: idempotence, acks, batching).
_SECURITY_KEYS: Final = ("security.protocol", "sasl.mechanism", "oauth_cb")
_TIMEOUT_SEC: Final = 15.0


class KafkaReadError(RuntimeError):
    """The topic or the group could not be read or written."""


@dataclass(frozen=True)
class Topic:
    """The failure topic and how to reach it."""

    bootstrap_servers: str
    security: KafkaSecurity
    region: str
    name: str
    instance_id: str


def resolve_topic(
    instance: InstanceConfig,
    *,
    bootstrap_servers: str | None,
    cluster_arn: str | None,
    security: KafkaSecurity,
) -> Topic:
    """The failure topic of ``instance``: brokers as given, or the IAM brokers of
    the MSK cluster (as the job resolves them)."""
    name = instance.failure_topic_name
    options = KafkaOptions(
        topic=name, bootstrap_servers=bootstrap_servers, cluster_arn=cluster_arn, security=security
    )
    servers = resolve_bootstrap_servers(options, region=instance.region)
    return Topic(servers, security, instance.region, name, instance.instance_id)


def consumer_config(topic: Topic, group: str) -> dict[str, Any]:
    options = KafkaOptions(
        topic=topic.name, bootstrap_servers=topic.bootstrap_servers, security=topic.security
    )
    settings = KafkaSettings.from_options(
        options,
        region=topic.region,
        instance_id=topic.instance_id,
        bootstrap_servers=topic.bootstrap_servers,
    )
    job = producer_config(settings)
    conf: dict[str, Any] = {k: job[k] for k in _SECURITY_KEYS if k in job}
    conf.update(
        {
            "bootstrap.servers": topic.bootstrap_servers,
            "group.id": group,
            "client.id": group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            **END_OF_PARTITION_CONFIG,
            "socket.timeout.ms": 10_000,
            "session.timeout.ms": 10_000,
            # librdkafka logs every failed connect (level 3) until a call's
            # timeout; the command reports the failure once, with the brokers.
            "log_level": 2,
        }
    )
    return conf


class FailureTopicReader:
    """One consumer on the failure topic, for one run of the command."""

    def __init__(self, topic: Topic, group: str, consumer: Any | None = None) -> None:
        if consumer is None:
            consumer = Consumer(consumer_config(topic, group))
        self.topic = topic
        self.group = group
        self._consumer: Any = consumer

    def close(self) -> None:
        self._consumer.close()

    def _tp(self, partition: int, offset: int | None = None) -> Any:
        if offset is None:
            return TopicPartition(self.topic.name, partition)
        return TopicPartition(self.topic.name, partition, offset)

    def partitions(self) -> list[int]:
        try:
            metadata = self._consumer.list_topics(self.topic.name, timeout=_TIMEOUT_SEC)
        except Exception as exc:
            raise KafkaReadError(
                f"brokers {self.topic.bootstrap_servers}: cannot list topic "
                f"{self.topic.name} (are the brokers reachable from here?): {exc}"
            ) from exc
        found = metadata.topics.get(self.topic.name)
        if found is None or found.error is not None or not found.partitions:
            why = found.error if found is not None and found.error is not None else "absent"
            raise KafkaReadError(
                f"topic {self.topic.name} on {self.topic.bootstrap_servers}: {why}"
            )
        return sorted(found.partitions)

    def watermarks(self, partitions: list[int]) -> dict[int, tuple[int, int]]:
        marks: dict[int, tuple[int, int]] = {}
        for partition in partitions:
            low, high = self._consumer.get_watermark_offsets(
                self._tp(partition), timeout=_TIMEOUT_SEC
            )
            marks[partition] = (int(low), int(high))
        return marks

    def committed(self, partitions: list[int]) -> dict[int, int | None]:
        """The group's positions (None: never committed)."""
        found = self._consumer.committed([self._tp(p) for p in partitions], timeout=_TIMEOUT_SEC)
        positions: dict[int, int | None] = {}
        for tp in found:
            if tp.error is not None:
                raise KafkaReadError(
                    f"group {self.group}: committed offset of partition {tp.partition}: {tp.error}"
                )
            positions[tp.partition] = tp.offset if tp.offset >= 0 else None
        return positions

    def offsets_for_time(self, partitions: list[int], when_ms: int) -> dict[int, int]:
        """The first offset at or after ``when_ms`` per partition (-1: none)."""
        found = self._consumer.offsets_for_times(
            [self._tp(p, when_ms) for p in partitions], timeout=_TIMEOUT_SEC
        )
        return {tp.partition: int(tp.offset) for tp in found}

    def commit(self, offsets: Mapping[int, int]) -> None:
        """Store the group's positions, synchronously (raises if the broker refused)."""
        if not offsets:
            return
        try:
            result = self._consumer.commit(
                offsets=[self._tp(p, o) for p, o in sorted(offsets.items())], asynchronous=False
            )
        except Exception as exc:
            raise KafkaReadError(
                f"group {self.group}: commit {dict(offsets)} failed: {exc}"
            ) from exc
        for tp in result or []:
            if tp.error is not None:
                raise KafkaReadError(
                    f"group {self.group}: commit of partition {tp.partition} failed: {tp.error}"
                )

    def records(
        self,
        starts: Mapping[int, int],
        high: Mapping[int, int],
        selection: Selection,
        *,
        poll_sec: float = 1.0,
        idle_polls: int = 60,
        timeout_sec: float | None = None,
    ) -> Iterator[FailedRecord]:
        """Every record from ``starts`` to the end (see the module docstring),
        in offset order per partition."""
        self._consumer.assign([self._tp(p, o) for p, o in starts.items()])
        last = {p: o - 1 for p, o in starts.items()}
        ended: set[int] = set()
        at_end = PartitionEnds(high)
        idle = 0
        deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
        try:
            # Not a sleep: each turn consumes (poll blocks up to poll_sec).
            while not at_end.reached(set(starts) - ended):
                if deadline is not None and time.monotonic() > deadline:
                    raise KafkaReadError(
                        f"topic {self.topic.name}: read not finished after {timeout_sec:.0f}s "
                        f"(positions {last})"
                    )
                message = self._consumer.poll(poll_sec)
                if message is None:
                    idle += 1
                    if idle >= idle_polls:
                        waiting = at_end.missing(set(starts) - ended)
                        raise KafkaReadError(
                            f"topic {self.topic.name}: nothing from partitions {waiting} for "
                            f"{idle} polls of {poll_sec:g}s and no end of partition "
                            f"(positions {last})"
                        )
                    continue
                idle = 0
                error = message.error()
                if error is not None:
                    if error.code() != END_OF_PARTITION:
                        raise KafkaReadError(f"topic {self.topic.name}: {error}")
                    partition = int(message.partition())
                    at_end.event(partition, int(message.offset()), last.get(partition))
                    continue
                partition = int(message.partition())
                at_end.record(partition)
                if partition in ended:
                    continue
                record = to_record(message)
                if selection.past_end(record):
                    ended.add(partition)
                    self._consumer.pause([self._tp(partition)])
                    continue
                last[partition] = record.offset
                yield record
        finally:
            self._consumer.unassign()


def to_record(message: Any) -> FailedRecord:
    """A consumed message as the hook sees it."""
    headers = decode_headers(message.headers())
    raw_key = message.key()
    key = raw_key.decode("utf-8", errors="replace") if isinstance(raw_key, bytes) else raw_key
    if not key:
        found = dict(headers)
        key = record_key(found.get("stream"), found.get("shard"), found.get("sequence_number"))
    kind, stamp = message.timestamp()
    value = message.value()
    return FailedRecord(
        data=bytes(value) if value is not None else b"",
        reason=reason_of(headers),
        headers=headers,
        key=str(key),
        partition=int(message.partition()),
        offset=int(message.offset()),
        timestamp_ms=int(stamp) if kind != 0 and stamp >= 0 else None,
    )
