"""The throughput part of :mod:`bench.dedup`: its source files (micro-batches of
the job's mix, two files a batch) and its baseline, bare Spark as a stream."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.framework import Context
from bench.stream import (
    arrival_of,
    job_config,
    mixed_records,
    now,
    ran_batch,
    run_to_end,
    start_query,
    write_source_file,
)
from bench.throughput import bare_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def bare_sink(out: Path) -> Callable[[DataFrame, int], None]:
    def write(frame: DataFrame, batch_id: int) -> None:
        bare_plan(frame).write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))

    return write


def bare(ctx: Context, name: str, count: int, warmups: int) -> list[float]:
    """Bare Spark as a stream: the same files and triggers, each micro-batch
    parsed, de-duplicated within itself and written as Parquet (no state, no
    validation, no failure records, no table commit)."""
    config = job_config(ctx, f"{name}_bare")
    root = Path(config.checkpoint_location).parent
    write_batches(root / "source", "bare", count, warmups + ctx.timed_rounds)
    query = start_query(
        ctx.spark,
        config,
        root / "source",
        plan=lambda raw, _config: raw,
        sink=bare_sink(root / "out"),
        files_per_batch=2,
    )
    data = [e for e in run_to_end(query) if ran_batch(e) and int(e["numInputRows"]) > 0]
    return [int(e["durationMs"]["triggerExecution"]) / 1000 for e in data[warmups:]]


def write_batches(source: Path, prefix: str, count: int, batches: int) -> None:
    """``batches`` micro-batches of ``count`` records of the job's mix (new ids
    each), each as two files (two shards), arrival times a second apart."""
    start = now()
    half = -(-count // 2)
    for batch in range(batches):
        records = mixed_records(count, f"tp-{prefix}-{batch}", seed=batch)
        for shard, part in enumerate((records[:half], records[half:])):
            write_source_file(source, 2 * batch + shard, part, arrival_of(batch, start), shard)
