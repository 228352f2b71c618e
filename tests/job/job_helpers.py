"""Helpers shared by the job's tests: raw source rows, configs, plan shuffles."""

from __future__ import annotations

import json
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, ClassVar

from py4j.protocol import Py4JJavaError
from pyspark.java_gateway import ensure_callback_server_started

from job.sinks.batch_task import output_rows, split
from job.sources.schema import SOURCE_SCHEMA
from local.table import sql_catalog
from model.config import EventField, JobConfig
from model.kafka_settings import KafkaSettings
from model.table_layout import table_columns

ARRIVAL = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def event(
    event_id: str, occurred_at: str = "2026-01-02T03:04:05.123456789Z", **extra: Any
) -> bytes:
    body = {"id": event_id, "type": "created", "occurredAt": occurred_at, "payload": {"n": 1}}
    body.update(extra)
    return json.dumps(body, separators=(",", ":")).encode()


def raw_rows(
    records: list[bytes], *, shard: str = "shardId-000000000000", first_seq: int = 1
) -> list[tuple[Any, ...]]:
    """Plain (not aggregated) records: no sub-sequence number."""
    return [
        (data, "stream-a", f"pk-{i}", str(first_seq + i), ARRIVAL.replace(tzinfo=None), shard, None)
        for i, data in enumerate(records)
    ]


def raw_frame(spark: Any, records: list[bytes], **kw: Any) -> Any:
    return spark.createDataFrame(raw_rows(records, **kw), SOURCE_SCHEMA)


def table_rows(batch: Any, *, fields: Sequence[EventField], batch_id: int) -> Any:
    """The valid rows of a classified batch as the job writes them to the table:
    :func:`job.sinks.batch_task.output_rows` on the driver, then each task's
    :func:`job.sinks.batch_task.split` (the table's columns, in its order)."""
    columns = tuple(column.name for column in table_columns(fields))
    rows = output_rows(batch, fields=fields, batch_id=batch_id)

    def valid(batches: Iterable[Any]) -> Iterator[Any]:
        for arrow in batches:
            yield split(arrow, columns)[0]

    return rows.mapInArrow(valid, rows.select(*columns).schema)


def job_config(
    *,
    database: str,
    bootstrap: str,
    checkpoint: str = "/tmp/unused-checkpoint",
    **overrides: Any,
) -> JobConfig:
    raw: dict[str, Any] = {
        "instance_id": "test-us-east-1",
        "region": "us-east-1",
        "stream_name": "stream-a",
        "database": database,
        "checkpoint_location": checkpoint,
        "kafka": {
            "topic": f"failures.{database}",
            "bootstrap_servers": bootstrap,
            "delivery_timeout_ms": 5_000,
            "request_timeout_ms": 3_000,
            "flush_timeout_sec": 10,
        },
        "max_record_bytes": 2_048,
        "catalog": local_catalog(tempfile.mkdtemp(prefix="catalog-")),
    }
    raw.update(overrides)
    return JobConfig.from_dict(raw)


def local_catalog(root: str) -> dict[str, str]:
    """A SQLite Iceberg catalog with its warehouse under ``root``."""
    return sql_catalog(root)


def table_ids(table: Any) -> list[str]:
    """Every id in the table's current snapshot (duplicates included)."""
    table.refresh()
    if table.current_snapshot() is None:
        return []
    return [str(i) for i in table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()]


def kafka_settings(config: JobConfig) -> KafkaSettings:
    assert config.kafka.bootstrap_servers is not None
    return KafkaSettings.for_job(config, config.kafka.bootstrap_servers)


_EXCHANGE = re.compile(r"^[\s:+\-|]*(\w*Exchange)\b", re.M)


def exchanges_in_plan(description: str) -> list[str]:
    """Exchange operators in a plan's tree (the final plan when AQE ran).

    An adaptive plan still running prints a "Current Plan" and the "Initial
    Plan", each with the same Exchange: counting both is how a one-shuffle
    batch once read as two, so such a plan is refused, not counted.
    """
    tree = description.split("\n\n", 1)[0]
    if "== Current Plan ==" in tree:
        raise AssertionError(f"an adaptive plan still running, not its final plan:\n{tree}")
    if "== Final Plan ==" in tree:
        tree = tree.split("== Final Plan ==", 1)[1].split("== Initial Plan ==", 1)[0]
    return _EXCHANGE.findall(tree)


class _HeldListener:
    """A ``SparkListenerInterface`` in Python that holds every event until the
    test releases it. A sleep per event made the store lag only while events
    kept arriving: a batch whose last seconds posted none (the driver's table
    commit) let the store catch up before the check, and the check failed in
    a full CI run."""

    def __init__(self, limit_sec: float) -> None:
        self.limit_sec = limit_sec
        self.released = threading.Event()
        self.events = 0

    # Object's methods, asked by the bus's list when it removes a listener: the
    # listener itself is matched by reference before ``equals`` is called.
    def equals(self, _other: object) -> bool:
        return False

    def hashCode(self) -> int:  # noqa: N802 (Java's name)
        return id(self) & 0x7FFFFFFF

    def toString(self) -> str:  # noqa: N802 (Java's name)
        return "held listener"

    def __getattr__(self, name: str) -> Callable[..., None]:
        if not name.startswith("on"):  # every method of the interface: onJobEnd...
            raise AttributeError(name)

        def handle(*_event: object) -> None:
            self.events += 1
            # Bounded: a test that never releases still ends.
            self.released.wait(self.limit_sec)

        return handle

    class Java:
        implements: ClassVar[list[str]] = ["org.apache.spark.scheduler.SparkListenerInterface"]


@contextmanager
def held_status_store(spark: Any, limit_sec: float = 60.0) -> Iterator[Callable[[], None]]:
    """The status store falls behind, as on a loaded machine, until the caller
    calls the yielded release: a listener that blocks on every event shares
    the store's listener queue (``appStatus``, one thread), so the store's own
    listener sees no event posted after the first one until then."""

    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)
    listener = _HeldListener(limit_sec)
    # py4j makes a new Java proxy each time a Python object is passed, and the
    # bus removes a listener by identity: make one proxy and keep it.
    holder = gateway.jvm.java.util.concurrent.atomic.AtomicReference()
    holder.set(listener)
    proxy = holder.get()
    bus = spark._jsparkSession.sparkContext().listenerBus()
    bus.addToStatusQueue(proxy)
    try:
        yield listener.released.set
    finally:
        listener.released.set()
        bus.removeListener(proxy)
    seen = listener.events
    spark.range(1).collect()
    bus.waitUntilEmpty(60_000)
    assert listener.events == seen, "the held listener is still on the bus"


def status_store_behind(spark: Any) -> bool:
    """True if events posted so far have not all reached the listeners yet."""

    try:
        spark._jsparkSession.sparkContext().listenerBus().waitUntilEmpty(1)
    except Py4JJavaError:  # java.util.concurrent.TimeoutException
        return True
    return False
