"""process_batch on static (prepared) frames: both outputs, the exactly-once
commit of a replayed batch, duplicates within a batch, one shuffle, and a Kafka
outage that must fail the batch. Duplicates ACROSS batches are the state
store's job: tests/job/test_query.py runs them through a streaming query."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer
from pyspark.errors import PythonException

from job.micro_batch import BatchProcessor, BatchResult, one_pass, prepare
from job.sinks.batch_task import undeclared_key_counts
from job.sinks.kafka import KafkaDeliveryError
from local.emulators import Endpoints, free_port
from local.spark_stages import shuffles_of
from local.table import orphan_files
from model.record import REASON, UNDECLARED_KEYS
from tests.job.job_helpers import (
    event,
    held_status_store,
    job_config,
    kafka_settings,
    raw_frame,
    status_store_behind,
    table_ids,
)


def _processor(database: str, bootstrap: str) -> tuple[BatchProcessor, list[BatchResult]]:
    config = job_config(database=database, bootstrap=bootstrap)
    results: list[BatchResult] = []
    processor = BatchProcessor(
        config, kafka_settings(config), on_result=results.append, query_id="query-1"
    )
    return processor, results


def _batch(spark: Any, processor: BatchProcessor, records: list[bytes], **kw: Any) -> Any:
    return prepare(raw_frame(spark, records, **kw), processor.config)


def read_topic(bootstrap: str, topic: str, expected: int, timeout: float = 30.0) -> list[Any]:
    """Messages on ``topic`` (polled until ``expected`` arrived or the deadline)."""

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    messages: list[Any] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(messages) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                messages.append(message)
        # A little longer: more than expected would be a bug too.
        extra_deadline = time.monotonic() + 2
        while time.monotonic() < extra_deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append(message)
    finally:
        consumer.close()
    return messages


@pytest.fixture
def database() -> Iterator[str]:
    yield f"batch_{uuid.uuid4().hex[:8]}"


def test_batch_writes_valid_rows_and_sends_failures_with_headers(
    spark: Any, endpoints: Endpoints, database: str
) -> None:
    processor, results = _processor(database, endpoints.kafka_bootstrap)
    records = [
        event("a"),
        event("b", "2026-01-02T03:04:05.987654321+09:00"),
        b"not json",
        event("c", payload=42),
    ]
    result = processor.process_batch(_batch(spark, processor, records), 0)

    assert results == [result]
    assert (result.input_rows, result.failure_records) == (4, 2)
    assert dict(result.failures_by_reason) == {"malformed_json": 1, "wrong_type": 1}
    assert result.oldest_arrival is not None
    assert (result.committed, result.table_records) == (True, 2)
    assert sorted(table_ids(processor.table)) == ["a", "b"]
    rows = {r["id"]: r for r in processor.table.scan().to_arrow().to_pylist()}
    assert rows["b"]["occurred_at_raw"] == "2026-01-02T03:04:05.987654321+09:00"
    assert rows["b"]["occurred_at"].isoformat() == "2026-01-01T18:04:05.987654"
    # Partitioned by the UTC day of the event time: "b" happened on Jan 1st in UTC.
    days = {str(d) for d in processor.table.inspect.partitions().column("partition").to_pylist()}
    assert days == {
        "{'occurred_at_day': datetime.date(2026, 1, 1)}",
        "{'occurred_at_day': datetime.date(2026, 1, 2)}",
    }
    snapshot = processor.table.current_snapshot()
    assert snapshot is not None
    assert snapshot.summary["spark.sql.streaming.queryId"] == "query-1"
    assert snapshot.summary["spark.sql.streaming.epochId"] == "0"

    messages = read_topic(endpoints.kafka_bootstrap, processor.kafka.topic, expected=2)
    by_key = {m.key().decode(): m for m in messages}
    assert sorted(by_key) == [
        "stream-a/shardId-000000000000/3",
        "stream-a/shardId-000000000000/4",
    ]
    headers = dict(by_key["stream-a/shardId-000000000000/3"].headers())
    assert headers["reason"] == b"malformed_json"
    assert headers["exception"] == b"JSONDecodeError"
    assert headers["sequence_number"] == b"3"
    assert headers["shard"] == b"shardId-000000000000"
    assert by_key["stream-a/shardId-000000000000/3"].value() == b"not json"
    assert dict(by_key["stream-a/shardId-000000000000/4"].headers())["reason"] == b"wrong_type"


def test_a_replayed_batch_is_not_committed_twice_and_duplicates_in_a_batch_collapse(
    spark: Any, endpoints: Endpoints, database: str
) -> None:
    processor, results = _processor(database, endpoints.kafka_bootstrap)
    first = _batch(spark, processor, [event("a"), event("b"), event("a")])
    processor.process_batch(first, 0)
    snapshots = len(processor.table.snapshots())
    processor.process_batch(first, 0)  # Spark replays batch 0 after a crash
    assert [r.committed for r in results] == [True, False]
    assert len(processor.table.snapshots()) == snapshots, "the replay commits nothing"
    processor.process_batch(_batch(spark, processor, [event("c")], first_seq=10), 1)

    assert sorted(table_ids(processor.table)) == ["a", "b", "c"]
    batch_of = {r["id"]: r["batch_id"] for r in processor.table.scan().to_arrow().to_pylist()}
    assert batch_of == {"a": 0, "b": 0, "c": 1}


def test_a_new_query_on_the_same_table_commits_its_own_batch_zero(
    spark: Any, endpoints: Endpoints, database: str
) -> None:
    """The committed-batch mark belongs to a query id: a fresh checkpoint (a new
    query) must not mistake its batch 0 for the old query's."""
    processor, _ = _processor(database, endpoints.kafka_bootstrap)
    processor.process_batch(_batch(spark, processor, [event("a")]), 0)
    fresh = BatchProcessor(
        processor.config, processor.kafka, table=processor.table, query_id="query-2"
    )
    assert fresh.process_batch(_batch(spark, fresh, [event("b")], first_seq=5), 0).committed
    assert sorted(table_ids(processor.table)) == ["a", "b"]


def test_the_whole_micro_batch_runs_exactly_one_shuffle(
    spark: Any, endpoints: Endpoints, database: str
) -> None:
    processor, _ = _processor(database, endpoints.kafka_bootstrap)
    warm = _batch(spark, processor, [event("w")])
    processor.process_batch(warm, 0)  # table created, one snapshot stored

    batch = _batch(spark, processor, [event("a"), event("a"), event("w"), b"bad"], first_seq=5)
    # The de-duplication's exchange (the state store's, in a streaming query)
    # is the only shuffle: sending failures, writing files and committing add
    # none. Counted in completed stages once Spark's listener bus has drained
    # (shuffles_of), never in printed plans: the persisted batch prints its
    # Exchange again in every execution that reads the cache.
    assert shuffles_of(spark, lambda: processor.process_batch(batch, 1)) == 1


def test_the_shuffle_count_holds_while_the_status_store_lags(
    spark: Any, endpoints: Endpoints, database: str
) -> None:
    """The flaky run's condition, made to happen every time (see above)."""
    processor, _ = _processor(database, endpoints.kafka_bootstrap)
    processor.process_batch(_batch(spark, processor, [event("w")]), 0)
    batch = _batch(spark, processor, [event("a"), event("a"), event("w"), b"bad"], first_seq=5)
    behind: list[bool] = []

    with held_status_store(spark) as release:

        def run() -> None:
            processor.process_batch(batch, 1)
            behind.append(status_store_behind(spark))
            release()  # the events reach the store only now, after the batch

        assert shuffles_of(spark, run) == 1
    assert behind == [True], "the store lagged when the batch returned: the case is real"


def test_undeliverable_failure_records_fail_the_batch_and_write_nothing(
    spark: Any, database: str
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    processor, results = _processor(database, dead)
    batch = _batch(spark, processor, [event("a"), b"bad"])
    started = time.monotonic()
    # The sender raises in a Python worker; the driver gets Spark's
    # PythonException carrying the worker's exception class and message.
    with pytest.raises(
        PythonException,
        match=rf"{KafkaDeliveryError.__name__}: 1 of 1 failure records not delivered to "
        rf"topic 'failures\.{database}' at {re.escape(dead)}",
    ):
        processor.process_batch(batch, 0)
    assert time.monotonic() - started < 60, "bounded by delivery.timeout.ms"
    assert results == []
    assert table_ids(processor.table) == [], "the valid row waits for the replay"
    assert processor.table.current_snapshot() is None


def test_files_a_killed_attempt_wrote_are_never_read_and_are_found_as_orphans(
    spark: Any, endpoints: Endpoints, database: str
) -> None:
    processor, _ = _processor(database, endpoints.kafka_bootstrap)
    processor.process_batch(_batch(spark, processor, [event("a")]), 0)
    # An attempt killed after its executors wrote "b" but before the commit.
    written = one_pass(
        _batch(spark, processor, [event("b")], first_seq=5),
        1,
        config=processor.config,
        kafka=processor.kafka,
        table=processor.table,
        write_files=True,
    ).data_files
    leftovers = {f.file_path.removeprefix("file://") for f in written}
    assert leftovers, "the attempt wrote a file"
    assert table_ids(processor.table) == ["a"], "nothing reads an uncommitted file"

    processor.process_batch(_batch(spark, processor, [event("b")], first_seq=5), 1)
    assert sorted(table_ids(processor.table)) == ["a", "b"]
    orphans = {str(p) for p in orphan_files(processor.table, timedelta(0), now=time.time() + 1)}
    assert orphans == leftovers


def test_each_task_counts_the_undeclared_keys_of_its_valid_rows_only() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            UNDECLARED_KEYS: [["channel"], None, ["channel", "tier"], ["channel"]],
            REASON: [None, None, None, "wrong_type"],
        }
    )
    assert undeclared_key_counts(batch) == {"channel": 2, "tier": 1}
    clean = pa.RecordBatch.from_pydict(
        {UNDECLARED_KEYS: pa.array([None, None], pa.list_(pa.string())), REASON: [None, None]}
    )
    assert undeclared_key_counts(clean) == {}
