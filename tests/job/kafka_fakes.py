"""A ``confluent_kafka.Producer`` stand-in for the failure producer's tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from job.sinks.kafka import ProducerCache, deliver
from model.failure_store import FailureStore
from model.kafka_settings import KafkaSettings


class FakeProducer:
    """Queues a delivery report per produced message; ``flush`` delivers them.

    A test's subclass decides the outcome: :meth:`refuse` raises to refuse a
    message at produce time (librdkafka's own checks, a full queue), and
    :meth:`report` gives the n-th message's delivery error (None: delivered).
    """

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.pending: list[tuple[Any, Any]] = []
        self.purged = False

    def refuse(self, message: dict[str, Any]) -> None:
        """Raise to refuse ``message`` before it is queued; accepts by default."""

    def report(self, message: dict[str, Any], index: int) -> Any:
        """The delivery error of the ``index``-th message sent; None by default."""
        return None

    def produce(self, topic: str, **kw: Any) -> None:
        message = {"topic": topic, **kw}
        self.refuse(message)
        self.pending.append((kw["on_delivery"], self.report(message, len(self.sent))))
        self.sent.append(message)

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        pending, self.pending = self.pending, []
        for callback, error in pending:
            callback(error, None)
        return 0

    def purge(self) -> None:
        self.purged = True


def deliver_through(
    producer: FakeProducer,
    rows: Iterable[dict[str, Any]],
    settings: KafkaSettings,
    store: FailureStore | None = None,
) -> int:
    """:func:`job.sinks.kafka.deliver` with ``producer`` as every task's producer."""
    return deliver(iter(rows), settings, ProducerCache(lambda _c: producer), store)
