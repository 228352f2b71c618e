"""Throughput of the ``python-kinesis`` Spark source against a raw boto3 loop.

Both read the same records from the same moto stream in the same run, so the
ratio says what the Spark source costs on top of the GetRecords calls it
cannot avoid, independent of how fast this machine or moto is. Each repeat
uses a fresh stream (same shard count, same number of records), so no run
reads a shard the previous one grew.

* baseline: one thread per shard, GetShardIterator(TRIM_HORIZON) then
  GetRecords(Limit=10000) until the shard is drained.
* subject, warm (the bar): a running query on ``format("python-kinesis")``
  whose first micro-batch (a few warm-up records) is held in its
  ``foreachBatch`` sink while the stream is filled; released, the next
  batch reads every record. Its time is that batch's ``triggerExecution``
  from the query progress: the driver's read, planning, the hand-off to the
  JVM, the (noop) write and the offset and commit logs. This is what a
  running job pays per batch.
* subject, cold (no bar, for the record): a new query into the ``noop`` sink,
  timed from ``start()`` until it has read every record. It adds the query's
  start: Spark launches three Python processes (the data source instance, the
  streaming runner, the read planner), whatever the source does.

Baseline and subjects alternate in order across repeats; ratios are of the
median rates. A full run starts with one unmeasured round: the session's
first streaming queries run before the JIT has compiled Spark's code paths.

The warm batch's phases (``durationMs``) are kept, and the driver-side
decode cost per record (botocore's parse of a GetRecords body plus the Arrow
batch, no network) is measured alone: the ceiling of one driver core, for
docs/source.md.
"""

from __future__ import annotations

import base64
import json
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from botocore import parsers
from botocore.session import get_session

from bench import framework
from bench import stream as bench_stream
from bench.framework import Context, bars, figure, machine_load, summary, write_result
from job.sources.kinesis_python import register
from job.sources.kinesis_rows import records_to_batch
from model.polling import poll_until
from producer.events import MixSpec, generate, now_utc
from producer.stream_writer import ensure_stream, kinesis_client, put_all

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NAME: Final = "kinesis_source"
# The running query reads at least 0.8x what a bare boto3 loop reads: the
# source adds little over reading the stream.
BAR: Final = 0.8

STREAM: Final = "bench-source"
# Records put before the warm query starts: its first batch, which pays the
# query's one-time costs and is not measured.
WARM_UP_RECORDS: Final = 8
# How long the warm query's first batch may wait for the stream to be filled.
FILL_TIMEOUT_SEC: Final = 600.0
# How often the warm query's progress is polled: its time comes from the
# progress itself, and each poll costs the JVM and this process CPU that the
# measured batch would otherwise have.
WARM_POLL_SEC: Final = 0.5
# The cold query is timed by the wall clock: polled often.
COLD_POLL_SEC: Final = 0.1
# The warm batch's phases kept in the results (Spark's durationMs keys).
PHASES: Final = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


@dataclass(frozen=True)
class Measured:
    records: int
    seconds: float
    phases_ms: dict[str, int] = field(default_factory=dict)

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def fill_stream(client: Any, stream: str, records: int, shards: int) -> None:
    ensure_stream(client, stream, shards)
    mix = generate(MixSpec(count=records, malformed_share=0, duplicate_share=0), now_utc())
    put_all(client, stream, mix)


def raw_loop(client: Any, stream: str) -> Measured:
    shard_ids = [s["ShardId"] for s in client.list_shards(StreamName=stream)["Shards"]]

    def drain(shard_id: str) -> int:
        iterator = client.get_shard_iterator(
            StreamName=stream, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        count = 0
        while iterator:
            response = client.get_records(ShardIterator=iterator, Limit=10_000)
            count += len(response["Records"])
            if not response["Records"] and response.get("MillisBehindLatest", 0) == 0:
                break
            iterator = response.get("NextShardIterator")
        return count

    started = time.perf_counter()
    with ThreadPoolExecutor(len(shard_ids)) as pool:
        total = sum(pool.map(drain, shard_ids))
    return Measured(total, time.perf_counter() - started)


def source_frame(spark: SparkSession, endpoint: str, stream: str, work: Path) -> DataFrame:
    """``format("python-kinesis")`` over ``stream``; its tasks record each
    batch's ends under ``work`` (beside the query's checkpoint)."""
    register(spark)
    return (
        spark.readStream.format("python-kinesis")
        .option("kinesis.streamName", stream)
        .option("kinesis.region", framework.REGION)
        .option("kinesis.endpointUrl", endpoint)
        .option("kinesis.startingPosition", "TRIM_HORIZON")
        .option("kinesis.maxFetchRecordsPerShard", "100000")
        .option("kinesis.maxFetchTimePerShardSec", "60")
        .option("kinesis.metadataPath", str(work / "kinesis_ends"))
        .load()
    )


def rows_read(query: Any) -> int:
    if query.exception() is not None:
        raise RuntimeError(f"query failed: {query.exception()}")
    return bench_stream.rows_read(query)


def cold_source(
    spark: SparkSession, work: Path, endpoint: str, stream: str, records: int
) -> Measured:
    """A new query, from ``start()`` until every record is read."""
    started = time.perf_counter()
    query = bench_stream.read_only_query(
        source_frame(spark, endpoint, stream, work), work / "checkpoint"
    )
    try:
        poll_until(
            lambda: rows_read(query) >= records,
            timeout=FILL_TIMEOUT_SEC,
            interval=COLD_POLL_SEC,
            on_timeout=lambda: TimeoutError(f"cold query read {rows_read(query)}/{records}"),
        )
        elapsed = time.perf_counter() - started
        seen = rows_read(query)
    finally:
        query.stop()
    return Measured(seen, elapsed)


class _Gate:
    """Holds the warm query's first batch in its sink until the stream is
    filled, so the next batch finds every record at once."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def sink(self, frame: DataFrame, batch_id: int) -> None:
        frame.write.format("noop").mode("overwrite").save()
        if batch_id == 0:
            self.entered.set()
            if not self.release.wait(FILL_TIMEOUT_SEC):
                raise TimeoutError("the warm-up batch was never released")


def warm_source(
    spark: SparkSession, work: Path, endpoint: str, stream: str, fill: Callable[[], int]
) -> Measured:
    """A running query reads what ``fill()`` put, in one batch after its first."""
    gate = _Gate()
    query = (
        source_frame(spark, endpoint, stream, work)
        .writeStream.foreachBatch(gate.sink)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:

        def first_batch_held() -> bool:
            rows_read(query)  # raises if the query failed
            return gate.entered.is_set()

        poll_until(
            first_batch_held,
            timeout=FILL_TIMEOUT_SEC,
            interval=WARM_POLL_SEC,
            on_timeout=lambda: TimeoutError("the warm query's first batch never ran"),
        )
        expected = fill()
        gate.release.set()
        poll_until(
            lambda: rows_read(query) >= expected,
            timeout=FILL_TIMEOUT_SEC,
            interval=WARM_POLL_SEC,
            on_timeout=lambda: TimeoutError(f"warm query read {rows_read(query)}/{expected}"),
        )
        measured = [
            p for p in query.recentProgress if int(p["batchId"]) > 0 and int(p["numInputRows"])
        ]
    finally:
        gate.release.set()
        query.stop()
    durations = [p["durationMs"] for p in measured]
    return Measured(
        sum(int(p["numInputRows"]) for p in measured),
        sum(int(d["triggerExecution"]) for d in durations) / 1000.0,
        {phase: sum(int(d.get(phase, 0)) for d in durations) for phase in PHASES},
    )


def decode_per_core(records: int, repeats: int) -> Measured:
    """What one driver core does per record without the network: botocore
    parses a GetRecords JSON body of ``records`` records (base64 data,
    epoch timestamps) and they become one Arrow batch. The best of ``repeats``."""
    model = get_session().get_service_model("kinesis")
    output = model.operation_model("GetRecords").output_shape
    parser = parsers.create_parser(model.metadata["protocol"])
    mix = generate(MixSpec(count=records, malformed_share=0, duplicate_share=0), now_utc())
    arrival = time.time()
    body = json.dumps(
        {
            "Records": [
                {
                    "Data": base64.b64encode(record.data).decode(),
                    "PartitionKey": record.partition_key,
                    "SequenceNumber": str(49_000_000_000_000_000_000 + n),
                    "ApproximateArrivalTimestamp": arrival,
                }
                for n, record in enumerate(mix)
            ],
            "MillisBehindLatest": 0,
            "NextShardIterator": "next",
        }
    ).encode()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        parsed = parser.parse({"status_code": 200, "headers": {}, "body": body}, output)
        batch = records_to_batch(STREAM, "shardId-000000000000", parsed["Records"])
        best = min(best, time.perf_counter() - started)
    if batch.num_rows != records:
        raise RuntimeError(f"decoded {batch.num_rows} of {records} records")
    return Measured(records, best)


@dataclass(frozen=True)
class Round:
    """One repeat: the three measurements over one fresh stream."""

    baseline: Measured
    warm: Measured
    cold: Measured


def one_round(
    ctx: Context, client: Any, stream: str, size: tuple[int, int], *, baseline_first: bool
) -> Round:
    """``size`` is (records, shards)."""
    records, shards = size
    endpoint = ctx.emulators.endpoints.aws_url
    fill_stream(client, stream, WARM_UP_RECORDS, shards)
    loops: list[Measured] = []

    def fill() -> int:
        fill_stream(client, stream, records, shards)
        if baseline_first:
            loops.append(raw_loop(client, stream))
        return WARM_UP_RECORDS + records

    warm = warm_source(ctx.spark, ctx.scratch(NAME), endpoint, stream, fill)
    if not baseline_first:
        loops.append(raw_loop(client, stream))
    total = WARM_UP_RECORDS + records
    cold = cold_source(ctx.spark, ctx.scratch(NAME), endpoint, stream, total)
    return Round(loops[0], warm, cold)


def run(ctx: Context) -> None:
    records, shards = (500, 2) if ctx.quick else (20_000, 4)
    client = kinesis_client(framework.REGION, ctx.emulators.endpoints.aws_url)
    load_before = machine_load()
    if not ctx.quick:
        # Not measured: the session's first streaming queries run Spark's code
        # paths before the JIT has compiled them; a running job is past that.
        one_round(ctx, client, f"{STREAM}-warm-up", (records, shards), baseline_first=True)
    # Alternate which runs first, so both see the same machine load.
    rounds = [
        one_round(ctx, client, f"{STREAM}-{n}", (records, shards), baseline_first=n % 2 == 0)
        for n in range(ctx.timed_rounds)
    ]
    baseline = [r.baseline for r in rounds]
    warm = [r.warm for r in rounds]
    cold = [r.cold for r in rounds]
    decode = decode_per_core(10_000, 5)
    short = [m.records for m in baseline + cold if m.records != records + WARM_UP_RECORDS]
    short += [m.records for m in warm if m.records != records]
    if short:
        raise RuntimeError(f"a run read {short[0]} records; expected {records} (+ warm-up)")
    base_rate = statistics.median(m.records_per_second for m in baseline)
    warm_rate = statistics.median(m.records_per_second for m in warm)
    cold_rate = statistics.median(m.records_per_second for m in cold)
    ratio = warm_rate / base_rate
    cold_ratio = cold_rate / base_rate
    middle = sorted(warm, key=lambda m: m.records_per_second)[len(warm) // 2]
    write_result(
        ctx,
        NAME,
        {
            "what": "python-kinesis source vs raw boto3 GetRecords loop (moto)",
            "records": records,
            "shards": shards,
            "unmeasured_warm_up_round": not ctx.quick,
            "baseline": {
                "what": "boto3 GetRecords loop, one thread per shard",
                "seconds": summary([m.seconds for m in baseline]),
                "records_per_second_median": round(base_rate, 1),
            },
            "subject": {
                "what": (
                    "running query (foreachBatch -> noop write): triggerExecution of the "
                    "batch that reads every record, after a warm-up batch"
                ),
                "seconds": summary([m.seconds for m in warm]),
                "records_per_second_median": round(warm_rate, 1),
                "phases_ms_of_median_run": middle.phases_ms,
            },
            "subject_cold": {
                "what": "new query, python-kinesis -> noop sink, from start() to every record",
                "seconds": summary([m.seconds for m in cold]),
                "records_per_second_median": round(cold_rate, 1),
            },
            "ratio_subject_to_baseline": {
                "of_medians": round(ratio, 3),
                "per_repeat": [
                    round(s.records_per_second / b.records_per_second, 3)
                    for s, b in zip(warm, baseline, strict=True)
                ],
                "bar": f">= {BAR}",
                "met": ratio >= BAR,
            },
            "ratio_cold_to_baseline": {
                "of_medians": round(cold_ratio, 3),
                "per_repeat": [
                    round(s.records_per_second / b.records_per_second, 3)
                    for s, b in zip(cold, baseline, strict=True)
                ],
            },
            "driver_decode_per_core": {
                "what": (
                    "botocore parse of one GetRecords JSON body + Arrow batch, no network, "
                    "best of 5"
                ),
                "records": decode.records,
                "seconds": round(decode.seconds, 4),
                "records_per_second": round(decode.records_per_second),
            },
            "load": {"before": load_before, "after": machine_load()},
        },
    )
    with figure(ctx, NAME) as (_, axes):
        bars(
            axes[0],
            ["boto3 GetRecords loop", "python-kinesis, running query", "python-kinesis, cold"],
            [base_rate, warm_rate, cold_rate],
            f"{records:,} records, {shards} shards (median of {ctx.timed_rounds})",
            "records/s",
        )
