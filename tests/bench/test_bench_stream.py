"""The benchmarks' static batch input, and the session it runs in."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.stream import micro_batch_session, write_batch_files


def test_a_static_batch_is_read_as_one_partition_per_shard(spark: Any, tmp_path: Path) -> None:
    records = [f'{{"id":"{i}"}}'.encode() for i in range(11)]
    files = write_batch_files(tmp_path / "source", records, datetime(2026, 1, 2, tzinfo=UTC))
    assert len(files) == 2
    frame = spark.read.parquet(str(tmp_path / "source"))
    per_task = frame.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert sorted(n for n in per_task if n) == [5, 6], "both cores get rows"
    got = frame.orderBy("shardId", "sequenceNumber").select("data", "shardId").collect()
    assert [bytes(r["data"]) for r in got] == records, "every record once, in order"
    assert sorted({r["shardId"] for r in got}) == ["shardId-000000000000", "shardId-000000000001"]


def test_a_static_batch_runs_as_spark_runs_a_micro_batch(spark: Any) -> None:
    session = micro_batch_session(spark)
    assert session.conf.get("spark.sql.adaptive.enabled") == "false"
    assert session.conf.get("spark.sql.cbo.enabled") == "false"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true", "the caller's session untouched"
    partitions = "spark.sql.shuffle.partitions"
    assert session.conf.get(partitions) == spark.conf.get(partitions), "the job's conf carried over"
    frame = session.createDataFrame([(i % 3, i) for i in range(9)], "k int, v int")
    plan = frame.dropDuplicates(["k"])._jdf.queryExecution().executedPlan().toString()
    assert "Exchange" in plan
    assert "AdaptiveSparkPlan" not in plan
