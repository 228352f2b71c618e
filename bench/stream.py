"""The job's streaming query over files the benchmark writes, and its records.

The streaming benchmarks run the job's own plan (``prepare``: classify, then
de-duplicate in the RocksDB state store on the Kinesis arrival time) into the
job's own ``foreachBatch`` (``BatchProcessor``: failures to Kafka, Iceberg data
files on the executors, one snapshot per batch), through a real streaming
query. Only the source differs: a Parquet file source with one file per
micro-batch (``maxFilesPerTrigger`` = 1), the same rows the Kinesis source
hands over (``SOURCE_SCHEMA``), so the benchmark decides what each batch holds.
Times come from the query's own progress events.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from bench.framework import REGION
from job import micro_batch
from job.micro_batch import BatchProcessor, prepare
from job.sources.schema import SOURCE_SCHEMA
from local.failures import ensure_topic
from local.table import sql_catalog
from model.config import JobConfig
from model.kafka_settings import KafkaSettings
from producer.events import MixSpec, generate, now_utc

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from bench.framework import Context

STREAM: Final = "bench-stream"


def job_config(ctx: Context, name: str, **overrides: Any) -> JobConfig:
    """The job's configuration with the defaults (24 h horizon, table
    maintenance), a local SQLite catalog and the run's Kafka broker."""
    root = ctx.scratch(name)
    raw: dict[str, Any] = {
        "instance_id": f"bench-{REGION}",
        "region": REGION,
        "stream_name": STREAM,
        "database": f"bench_{name}",
        "checkpoint_location": str(root / "checkpoint"),
        "kafka": {
            "topic": f"failures.{name}",
            "bootstrap_servers": ctx.emulators.endpoints.kafka_bootstrap,
        },
        "catalog": sql_catalog(root),
    }
    raw.update(overrides)
    config = JobConfig.from_dict(raw)

    ensure_topic(ctx.emulators.endpoints.kafka_bootstrap, config.kafka.topic)
    return config


def kafka_settings(config: JobConfig) -> Any:
    assert config.kafka.bootstrap_servers is not None
    return KafkaSettings.for_job(config, config.kafka.bootstrap_servers)


# --- records --------------------------------------------------------------------------------


# The share of valid events carrying one key the schema does not declare
# (kept in undeclared_fields and counted): producers ahead of the schema.
UNDECLARED_KEY: Final = "channel"
UNDECLARED_SHARE: Final = 0.10


def mixed_records(
    count: int, prefix: str, seed: int = 7, undeclared_share: float = 0.0
) -> list[bytes]:
    """The job's record mix (``producer.events``): 2 % malformed, 5 % re-sent ids,
    ``undeclared_share`` of the valid events with one undeclared key."""
    spec = MixSpec(
        count=count,
        id_prefix=prefix,
        seed=seed,
        undeclared_key=UNDECLARED_KEY if undeclared_share else "",
        undeclared_share=undeclared_share,
    )
    mix = generate(spec, now_utc())
    return [r.data for r in mix]


def unique_records(count: int, prefix: str, at: datetime) -> list[bytes]:
    """``count`` valid events with distinct random ids (UUIDs, as producers
    usually make them: random ids also compress like real ones in the state's
    changelog files); ``prefix`` seeds them, so a run is reproducible."""
    rng = random.Random(prefix)
    stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.123456789Z")
    template = '{"id":"%s","type":"created","occurredAt":"' + stamp + '","payload":{"n":%d}}'
    return [
        (template % (uuid.UUID(int=rng.getrandbits(128), version=4), i)).encode()
        for i in range(count)
    ]


def write_source_file(
    directory: Path, index: int, records: Sequence[bytes], arrival: datetime, shard: int = 0
) -> Path:
    """One micro-batch's rows as one Parquet file; files are picked in index
    order (their modification times are set in that order)."""
    directory.mkdir(parents=True, exist_ok=True)
    n = len(records)
    shard_id = f"shardId-{shard:012d}"
    table = pa.table(
        {
            "data": pa.array(records, pa.binary()),
            "streamName": pa.array([STREAM] * n, pa.string()),
            "partitionKey": pa.array([f"pk-{i % 1000}" for i in range(n)], pa.string()),
            "sequenceNumber": pa.array([f"{index:06d}{i:09d}" for i in range(n)], pa.string()),
            "approximateArrivalTimestamp": pa.array(
                [arrival.astimezone(UTC)] * n, pa.timestamp("us", tz="UTC")
            ),
            "shardId": pa.array([shard_id] * n, pa.string()),
            "subSequenceNumber": pa.nulls(n, pa.int64()),
        }
    )
    path = directory / f"{index:05d}.parquet"
    staging = directory.parent / f".{directory.name}-{index:05d}.parquet"
    pq.write_table(table, staging)
    stamp = 1_000_000_000 + index
    os.utime(staging, (stamp, stamp))
    staging.rename(path)  # appears whole: the source never lists a half-written file
    return path


# Shards of the stream a static batch is read from.
BATCH_SHARDS: Final = 2


def write_batch_files(
    directory: Path, records: Sequence[bytes], arrival: datetime, shards: int = BATCH_SHARDS
) -> list[Path]:
    """One static micro-batch as a stream of ``shards`` shards delivers it: one
    file per shard (contiguous slices of ``records``), so Spark reads it in
    ``shards`` partitions, as the Kinesis source hands the job one partition
    per shard. A single file of one row group is read by ONE task: every
    narrow step of the batch (the parse above all) then ran on one core of two,
    for the subject and for every baseline alike."""
    size = -(-len(records) // shards)  # ceiling: every record in some file
    slices = [records[shard * size : (shard + 1) * size] for shard in range(shards)]
    return [
        write_source_file(directory, shard, part, arrival, shard)
        for shard, part in enumerate(slices)
    ]


def micro_batch_session(spark: SparkSession) -> SparkSession:
    """A session set up as Spark runs a streaming query's micro-batches, for a
    static frame standing in for one: adaptive execution and cost-based
    optimization off. Spark runs every micro-batch, ``foreachBatch`` included,
    in a clone of the session with both off (``StreamExecution.runStream`` in
    apache/spark v4.0.0, sql/core/.../streaming/StreamExecution.scala:
    "Adaptive execution can change num shuffle partitions, disallow"). Left
    on, adaptive execution plans a static batch's exchange as a separate stage
    that the job never runs (0.3-0.4 s of a 200,000-record batch here)."""
    session = spark.newSession()
    session.conf.set("spark.sql.adaptive.enabled", "false")
    session.conf.set("spark.sql.cbo.enabled", "false")
    return session


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def arrival_of(index: int, start: datetime) -> datetime:
    """Arrival times one second apart per file: the watermark moves forward a
    little each batch, as behind a live stream, and never past a record."""
    return start + timedelta(seconds=index)


# --- the query ------------------------------------------------------------------------------


@dataclass
class BatchTimings:
    """The job's own split of a batch (its log line) and the commit's time."""

    one_pass: dict[int, float] = field(default_factory=dict)
    table: dict[int, float] = field(default_factory=dict)
    commit: list[float] = field(default_factory=list)


class _BatchLog(logging.Handler):
    """Reads ``job.micro_batch``'s per-batch line: ``batch %d: ... %.2fs
    (pass %.2fs, commit %.2fs)``."""

    def __init__(self, into: BatchTimings) -> None:
        super().__init__(logging.INFO)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args
        if not isinstance(args, tuple) or "(pass " not in str(record.msg):
            return
        batch_id, one_pass, table = int(str(args[0])), float(str(args[-2])), float(str(args[-1]))
        self.into.one_pass[batch_id] = one_pass
        self.into.table[batch_id] = table


@contextmanager
def batch_timings() -> Iterator[BatchTimings]:
    """Collect the job's per-batch split, and time each Iceberg commit (the
    job's ``commit_batch``, wrapped for the duration; nothing else changes)."""
    timings = BatchTimings()
    handler = _BatchLog(timings)
    logger = logging.getLogger(micro_batch.__name__)
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    original = getattr(micro_batch, "commit_batch")  # noqa: B009 (not exported: patched here)

    def commit_batch(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            timings.commit.append(time.perf_counter() - started)

    setattr(micro_batch, "commit_batch", commit_batch)  # noqa: B010
    try:
        yield timings
    finally:
        setattr(micro_batch, "commit_batch", original)  # noqa: B010
        logger.removeHandler(handler)
        logger.setLevel(level)


def start_query(
    spark: SparkSession,
    config: JobConfig,
    source: Path,
    *,
    table: Table | None = None,
    available_now: bool = True,
    trigger_sec: float = 0.0,
    plan: Callable[[DataFrame, JobConfig], DataFrame] | None = None,
    sink: Callable[[DataFrame, int], None] | None = None,
    files_per_batch: int = 1,
) -> StreamingQuery:
    """The job's plan (or ``plan``) and ``foreachBatch`` (or ``sink``) over
    ``source`` (``files_per_batch`` files per batch)."""
    each_batch = sink or BatchProcessor(config, kafka_settings(config), table=table)
    stream = (
        spark.readStream.schema(SOURCE_SCHEMA)
        .option("maxFilesPerTrigger", files_per_batch)
        .parquet(str(source))
    )
    writer = (
        (plan or prepare)(stream, config)
        .writeStream.option("checkpointLocation", config.checkpoint_location)
        .foreachBatch(each_batch)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(trigger_sec * 1000)} milliseconds")
    return writer.start()


def read_only_query(frame: DataFrame, checkpoint: Path) -> StreamingQuery:
    """``frame`` into Spark's ``noop`` sink, each batch as soon as the last
    ends: a query that only reads (the source benchmarks' subject)."""
    return (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )


def rows_read(query: StreamingQuery) -> int:
    """The records a query has read so far (its progress events still held)."""
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def run_to_end(query: StreamingQuery, timeout: int = 7200) -> list[dict[str, Any]]:
    """Wait for an ``availableNow`` query; its progress events, batches only."""
    query.awaitTermination(int(timeout))
    failure = query.exception()
    if failure is not None:
        raise RuntimeError(f"query failed: {failure}")
    if query.isActive:
        query.stop()
        raise TimeoutError(f"query still running after {timeout:.0f}s")
    return progress_events(query)


def progress_events(query: StreamingQuery) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    seen: set[tuple[str, int]] = set()
    for progress in query.recentProgress:
        data = progress if isinstance(progress, dict) else json.loads(progress.json)
        key = (str(data["timestamp"]), int(data["batchId"]))
        if key not in seen:
            seen.add(key)
            events.append(data)
    return events


def ran_batch(event: dict[str, Any]) -> bool:
    """A trigger that executed a batch (an idle trigger has no ``addBatch``)."""
    return "addBatch" in event.get("durationMs", {})


def state_figures(event: dict[str, Any]) -> dict[str, Any]:
    """The de-duplication operator's figures from one progress event."""
    operators = event.get("stateOperators") or []
    if not operators:
        return {}
    op = operators[0]
    custom = op.get("customMetrics", {})
    return {
        "numRowsTotal": int(op.get("numRowsTotal", 0)),
        "numRowsUpdated": int(op.get("numRowsUpdated", 0)),
        "memoryUsedBytes": int(op.get("memoryUsedBytes", 0)),
        "commitTimeMs": int(op.get("commitTimeMs", 0)),
        "allUpdatesTimeMs": int(op.get("allUpdatesTimeMs", 0)),
        # dropDuplicatesWithinWatermark scans the WHOLE state every batch for
        # expired keys (Spark's evictDupInfoFromState): this grows with the state.
        "allRemovalsTimeMs": int(op.get("allRemovalsTimeMs", 0)),
        "numRowsRemoved": int(op.get("numRowsRemoved", 0)),
        "rocksdbSstFileSize": int(custom.get("rocksdbSstFileSize", 0)),
        "rocksdbPinnedBlocksMemoryUsage": int(custom.get("rocksdbPinnedBlocksMemoryUsage", 0)),
        "customMetrics": {k: int(v) for k, v in custom.items()},
    }


def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
