"""Failure records to the instance's Kafka topic (MSK on AWS, tansu locally):
the executors' delivery and the records' wire format (key, headers). The
driver's side, the producer's settings, is :mod:`model.kafka_settings`.

Runs on the executors (inside ``mapInArrow``: an idempotent producer per
Python worker, kept between its tasks, see :class:`ProducerCache`), so a
failure spike is spread over the cluster instead of funnelled through the
driver. A task raises :class:`KafkaDeliveryError` unless
every record it produced has a successful delivery report after ``flush``:
the Spark job then fails, ``foreachBatch`` raises and the batch's offsets are
not committed (the batch is replayed on restart; consumers de-duplicate by the
record key, which is stable: ``stream/shard/sequenceNumber``).

No single record can fail a batch for ever: a record too large for the topic
(:mod:`model.failure_limits`) is claim-checked before it is produced, and one
the broker or librdkafka still refuses for its size or shape is claim-checked
after the fact; either way the topic gets a pointer record
(:mod:`model.claim_check`) whose original is in the claim-check store
(:mod:`model.failure_store`), written and acknowledged before the send.
A broker that is down still fails the task.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from confluent_kafka import Producer
from pyspark import TaskContext

from model.claim_check import (
    Pointer,
    fits_inline,
    message_size,
    object_key,
    pointer_record,
    sha256_hex,
)
from model.failure_limits import FailureLimits
from model.failure_record import record_headers, record_key
from model.failure_store import FailureStore, worker_store
from model.kafka_settings import (
    KafkaSettings,
    producer_config,
)
from model.record import (
    DATA,
    REASON,
    SEQUENCE,
    SHARD,
    STREAM,
    SUB_SEQUENCE,
)

_MAX_QUEUE_RETRIES: Final = 50
# Kafka errors about one record that no retry can cure: its size or its shape
# (librdkafka's KafkaError codes MSG_SIZE_TOO_LARGE, RECORD_LIST_TOO_LARGE,
# INVALID_RECORD). Such a record is claim-checked and sent as a pointer; any
# other error (broker down, timeout, authorization) still fails the task.
RECORD_ERROR_CODES: Final = frozenset({10, 18, 87})


class KafkaDeliveryError(RuntimeError):
    """Some failure records were not acknowledged by the broker."""


class ProducerCache:
    """One producer per settings, kept between the tasks a Python worker runs.

    A new idempotent producer costs a fixed 0.5 s before its first delivery
    report (it connects, then waits for its producer id), in every task of
    every batch that has failures: measured against the local broker, 0.505 s
    for 26 records with a new producer and 0.001 s with a kept one. Spark
    reuses Python workers, so a producer kept in the worker serves the next
    task. It is dropped after a task whose delivery failed (its state is
    suspect; the next task starts clean) and when it sat idle longer than
    ``idle_sec`` (a quiet stream: its connections and, on MSK, its IAM token
    are renewed by a new producer rather than on the first record).
    """

    def __init__(
        self,
        factory: Callable[[dict[str, Any]], Any] | None = None,
        *,
        idle_sec: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._factory = factory
        self._idle_sec = idle_sec
        self._clock = clock
        self._kept: dict[KafkaSettings, tuple[Any, float]] = {}

    def get(self, settings: KafkaSettings) -> Any:
        now = self._clock()
        for idle in [s for s, (_, used) in self._kept.items() if now - used > self._idle_sec]:
            self.discard(idle)  # this one's and any other's (e.g. a broker long gone)
        kept = self._kept.get(settings)
        if kept is not None:
            producer = kept[0]
        else:
            factory = self._factory or Producer
            producer = factory(producer_config(settings))
        self._kept[settings] = (producer, now)
        return producer

    def discard(self, settings: KafkaSettings) -> None:
        kept = self._kept.pop(settings, None)
        purge = getattr(kept[0], "purge", None) if kept is not None else None
        if purge is not None:
            purge()  # nothing of a dropped producer is sent later


# The Python worker's producers (module state lives as long as the worker).
WORKER_PRODUCERS: Final = ProducerCache()


def deliver(
    rows: Iterator[dict[str, Any]],
    settings: KafkaSettings,
    producers: ProducerCache | None = None,
    store: FailureStore | None = None,
) -> int:
    """Produce every row (claim-checking the large ones first), flush, check
    every report. Returns how many were sent."""
    if producers is None:
        # Kept only inside a Spark task; a driver-side caller (a script, a
        # test) gets a producer of its own, gone with the call.
        producers = WORKER_PRODUCERS if TaskContext.get() is not None else ProducerCache()
    if store is None and settings.store is not None:
        store = worker_store(settings.store)
    producer = producers.get(settings)
    try:
        return _Delivery(settings, producer, store).run(rows)
    except BaseException:
        producers.discard(settings)
        raise


def is_record_error(error: Any) -> bool:
    """A Kafka error about this one record that no retry can cure."""
    code = getattr(error, "code", None)
    return callable(code) and code() in RECORD_ERROR_CODES


@dataclass
class _Message:
    """One failure record as it goes to Kafka; ``pointer`` once claim-checked."""

    row: dict[str, Any]
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    pointer: Pointer | None = None


class _Delivery:
    """One task's failure records: each produced once, and a record Kafka
    refused for its size or shape claim-checked and produced again as a
    pointer. Any other refusal, or a report missing after ``flush``, raises
    :class:`KafkaDeliveryError`."""

    def __init__(self, settings: KafkaSettings, producer: Any, store: FailureStore | None) -> None:
        self.settings = settings
        self.producer = producer
        self.store = store
        self.limits = FailureLimits(settings.max_message_bytes)
        self.messages: list[_Message] = []
        # index -> the delivery report's error (None: delivered)
        self.reports: dict[int, Any] = {}

    def run(self, rows: Iterator[dict[str, Any]]) -> int:
        for row in rows:
            self.messages.append(self._prepare(row))
            self._send(len(self.messages) - 1)
            self.producer.poll(0)
        remaining = self._flush()
        refused = [
            index
            for index, error in self.reports.items()
            if error is not None and is_record_error(error) and self.messages[index].pointer is None
        ]
        for index in refused:
            error = self.reports.pop(index)
            self.messages[index] = self._claim_check(self.messages[index], str(error))
            self._send(index)
        if refused:
            remaining = self._flush()
        delivered = sum(1 for error in self.reports.values() if error is None)
        produced = len(self.messages)
        errors = [str(error) for error in self.reports.values() if error is not None]
        if errors or remaining or delivered != produced:
            first = errors[0] if errors else f"{remaining} still queued after flush"
            raise KafkaDeliveryError(
                f"{produced - delivered} of {produced} failure records not delivered to "
                f"topic {self.settings.topic!r} at {self.settings.bootstrap_servers}: {first}"
            )
        return delivered

    def _prepare(self, row: dict[str, Any]) -> _Message:
        key = record_key(
            row.get(STREAM.column),
            row.get(SHARD.column),
            row.get(SEQUENCE.column),
            row.get(SUB_SEQUENCE.column),
        )
        data = row.get(DATA) or b""
        message = _Message(
            row, key.encode(), bytes(data), record_headers(row, self.settings.instance_id)
        )
        size = message_size(message.key, message.value, message.headers)
        if fits_inline(size, self.limits):
            return message
        return self._claim_check(message)

    def _claim_check(self, message: _Message, delivery_error: str | None = None) -> _Message:
        """Store the original (acknowledged) and make the pointer record."""
        row = message.row
        data = bytes(row.get(DATA) or b"")
        if self.store is None:
            raise KafkaDeliveryError(
                f"failure record {message.key.decode()} ({len(data):,} bytes) needs the "
                "claim-check store and none is configured"
                + (f"; Kafka refused it: {delivery_error}" if delivery_error else "")
            )
        digest = sha256_hex(data)
        meta = {
            "reason": str(row.get(REASON)),
            "record-key": message.key.decode(),
            "instance": self.settings.instance_id,
        }
        if delivery_error:
            meta["delivery-error"] = delivery_error
        uri = self.store.put(
            object_key(
                row.get(STREAM.column),
                row.get(SHARD.column),
                row.get(SEQUENCE.column),
                row.get(SUB_SEQUENCE.column),
            ),
            data,
            digest,
            meta,
        )
        pointer = Pointer(uri, len(data), digest)
        value, headers = pointer_record(message.headers, data, pointer, delivery_error)
        return _Message(row, message.key, value, headers, pointer)

    def _send(self, index: int) -> None:
        message = self.messages[index]

        def on_delivery(err: Any, _msg: Any) -> None:
            self.reports[index] = err

        for attempt in range(_MAX_QUEUE_RETRIES + 1):
            try:
                self.producer.produce(
                    self.settings.topic,
                    value=message.value,
                    key=message.key,
                    headers=message.headers,
                    on_delivery=on_delivery,
                )
                return
            except BufferError:
                # Local queue full: let librdkafka drain it (bounded), then retry.
                if attempt == _MAX_QUEUE_RETRIES:
                    raise
                self.producer.poll(0.1)
            except Exception as exc:
                # librdkafka refuses a message above message.max.bytes at once
                # (KafkaException MSG_SIZE_TOO_LARGE), before any send.
                error = exc.args[0] if exc.args else None
                if not is_record_error(error):
                    raise
                self.reports[index] = error
                return

    def _flush(self) -> int:
        # Not a poll: flush() itself waits (in librdkafka) until the queue is
        # empty or its timeout; it may return early, so it is called again for
        # what is left of the bound.
        timeout = self.settings.flush_timeout_sec
        deadline = time.monotonic() + timeout
        remaining = int(self.producer.flush(timeout))
        while remaining and time.monotonic() < deadline:
            remaining = int(self.producer.flush(max(0.1, deadline - time.monotonic())))
        return remaining
