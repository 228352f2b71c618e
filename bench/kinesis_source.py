"""Throughput of the ``python-kinesis`` Spark source against a raw boto3 loop.

Both read the same records from the same moto stream in the same run, so the
ratio says what the Spark source costs on top of the GetRecords calls it
cannot avoid (micro-batch planning, the probe that bounds each batch, Python
workers, Arrow hand-off), independent of how fast this machine or moto is.

* baseline: one thread per shard, GetShardIterator(TRIM_HORIZON) then
  GetRecords(Limit=10000) until the shard is drained.
Each is run 3 times, alternating; the ratio is of the median rates.

* subject: a streaming query on ``format("python-kinesis")`` into the
  ``noop`` sink, timed from ``start()`` until it has read every record.
"""

from __future__ import annotations

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from app.polling import poll_until
from bench.framework import Context, Row, bars, figure, summary, write_result

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAME: Final = "kinesis_source"
# issue 11, item 4.
BAR: Final = 0.8

STREAM: Final = "bench-source"
REGION: Final = "us-east-1"


@dataclass(frozen=True)
class Measured:
    records: int
    seconds: float

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def fill_stream(client: Any, records: int, shards: int) -> None:
    from local.events import MixSpec, generate, now_utc
    from local.producer import ensure_stream, put_all

    ensure_stream(client, STREAM, shards)
    mix = generate(MixSpec(count=records, malformed_share=0, duplicate_share=0), now_utc())
    put_all(client, STREAM, mix)


def raw_loop(client: Any) -> Measured:
    shard_ids = [s["ShardId"] for s in client.list_shards(StreamName=STREAM)["Shards"]]

    def drain(shard_id: str) -> int:
        iterator = client.get_shard_iterator(
            StreamName=STREAM, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
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


def spark_source(
    spark: SparkSession, work: Path, endpoint: str, records: int, timeout: float = 600.0
) -> Measured:
    from app.sources.kinesis_python import register

    register(spark)
    frame = (
        spark.readStream.format("python-kinesis")
        .option("kinesis.streamName", STREAM)
        .option("kinesis.region", REGION)
        .option("kinesis.endpointUrl", endpoint)
        .option("kinesis.startingPosition", "TRIM_HORIZON")
        .option("kinesis.maxFetchRecordsPerShard", "100000")
        .load()
    )
    started = time.perf_counter()
    query = (
        frame.writeStream.format("noop")
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        seen = 0

        def read_all() -> bool:
            nonlocal seen
            if query.exception() is not None:
                raise RuntimeError(f"query failed: {query.exception()}")
            seen = sum(int(p["numInputRows"]) for p in query.recentProgress)
            return seen >= records

        poll_until(
            read_all,
            timeout=timeout,
            interval=0.05,
            on_timeout=lambda: TimeoutError(f"source read {seen}/{records} in {timeout:.0f}s"),
        )
        elapsed = time.perf_counter() - started
    finally:
        query.stop()
    return Measured(seen, elapsed)


def run(ctx: Context) -> list[Row]:
    from local.producer import kinesis_client

    records, shards = (2_000, 2) if ctx.quick else (20_000, 4)
    endpoint = ctx.emulators.endpoints.aws_url
    client = kinesis_client(REGION, endpoint)
    fill_stream(client, records, shards)
    spark = ctx.spark
    baseline: list[Measured] = []
    subject: list[Measured] = []
    for _ in range(ctx.repeats):  # alternating, so both see the same machine load
        baseline.append(raw_loop(client))
        subject.append(spark_source(spark, ctx.scratch(NAME), endpoint, records))
    short = [m.records for m in baseline + subject if m.records != records]
    if short:
        raise RuntimeError(f"read {short[0]} of {records} records")
    base_rate = statistics.median(m.records_per_second for m in baseline)
    subject_rate = statistics.median(m.records_per_second for m in subject)
    ratio = subject_rate / base_rate
    write_result(
        ctx,
        NAME,
        {
            "what": "python-kinesis source vs raw boto3 GetRecords loop (moto)",
            "records": records,
            "shards": shards,
            "baseline": {
                "what": "boto3 GetRecords loop, one thread per shard",
                "seconds": summary([m.seconds for m in baseline]),
                "records_per_second_median": round(base_rate, 1),
            },
            "subject": {
                "what": "Spark streaming query, python-kinesis -> noop sink, from start()",
                "seconds": summary([m.seconds for m in subject]),
                "records_per_second_median": round(subject_rate, 1),
            },
            "ratio_subject_to_baseline": {
                "of_medians": round(ratio, 3),
                "per_repeat": [
                    round(s.records_per_second / b.records_per_second, 3)
                    for s, b in zip(subject, baseline, strict=True)
                ],
                "bar": f">= {BAR}",
                "met": ratio >= BAR,
            },
        },
    )
    with figure(ctx, NAME) as (_, axes):
        bars(
            axes[0],
            ["boto3 GetRecords loop", "python-kinesis source"],
            [base_rate, subject_rate],
            f"{records:,} records, {shards} shards (median of {ctx.repeats})",
            "records/s",
        )
    return [
        Row(
            NAME,
            "python-kinesis vs boto3 loop",
            f"{ratio:.2f}x ({subject_rate:,.0f} vs {base_rate:,.0f} rec/s)",
            f">= {BAR}x",
            ratio >= BAR,
        )
    ]
