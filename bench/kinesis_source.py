"""Throughput of the ``python-kinesis`` Spark source against a raw boto3 loop.

Both read the same records from the same moto stream in the same run, so the
ratio says what the Spark source costs on top of the GetRecords calls it
cannot avoid (micro-batch planning, the probe that bounds each batch, Python
workers, Arrow hand-off), independent of how fast this machine or moto is.

* baseline: one thread per shard, GetShardIterator(TRIM_HORIZON) then
  GetRecords(Limit=10000) until the shard is drained.
* subject: a streaming query on ``format("python-kinesis")`` into the
  ``noop`` sink, timed from ``start()`` until it has read every record.
"""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from app.polling import poll_until

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


def spark_source(endpoint: str, records: int, timeout: float = 600.0) -> Measured:
    from app.session import build_session
    from app.sources.kinesis_python import register
    from app.spark_conf import local_conf

    work = Path(tempfile.mkdtemp(prefix="bench-"))
    conf = local_conf(str(work))
    conf["spark.sql.shuffle.partitions"] = "2"
    conf["spark.ui.showConsoleProgress"] = "false"
    spark = build_session(conf, "bench-kinesis-source")
    spark.sparkContext.setLogLevel("ERROR")
    try:
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
    finally:
        spark.stop()
