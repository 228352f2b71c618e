"""Throughput: the whole micro-batch against a bare Spark parse-and-insert.

All read the same pre-generated Parquet file of raw source rows (the job's
mix: 2 % malformed, 5 % re-sent ids, 10 % of the valid events with one key the
schema does not declare), in the same run, alternating (the order rotates
each repeat):

* subject: ``BatchProcessor.process_batch(prepared)``: classify,
  de-duplicate by id, failures to the Kafka broker (tansu), Iceberg data files
  on the executors, one snapshot committed by the driver;
* before: the same job with the undeclared-key capture left out
  (:func:`without_undeclared` in place of ``job.transform.with_undeclared``
  while its plan is built: both columns null, nothing counted), on its own
  table: what the job cost before it kept undeclared keys, on the same records;
* baseline: ``from_json`` + ``dropDuplicates(["id"])`` + Parquet write of the
  same columns (no validation, no failure records, no table commit).

Each side's plan is built once (``prepared = prepare(frame)`` for the subject),
as the job builds its query once on the stream (``job.driver``); each batch runs
it and builds only its per-batch part (the pass, the commit).

ratio = baseline seconds / subject seconds (bar: >= 0.5), after
``WARMUP_BATCHES`` untimed runs of each side; the capture's cost is the
subject's ratio against the before side's (bar: at most 5 % lower).
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from unittest import mock

from pyspark.sql import functions as sf
from pyspark.sql.types import StringType, StructField, StructType

from bench.framework import WARMUP_BATCHES, Context, bars, figure, summary, timed, write_result
from bench.stream import (
    UNDECLARED_SHARE,
    job_config,
    kafka_settings,
    micro_batch_session,
    mixed_records,
    now,
    write_batch_files,
)
from job import transform
from job.micro_batch import BatchProcessor, one_pass, prepare
from job.table.catalog import ensure_table
from job.table.commit import commit_batch
from job.transform import classify
from model.record import UNDECLARED_FIELDS, UNDECLARED_KEYS

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyiceberg.table import Table
    from pyspark.sql import DataFrame, SparkSession

    from model.config import JobConfig
    from model.kafka_settings import KafkaSettings

NAME: Final = "throughput"
BAR: Final = 0.5
# Keeping undeclared keys may cost at most 5 % of the ratio to bare Spark.
CAPTURE_BAR: Final = 0.05


def without_undeclared(staged: DataFrame, *_: Any, **__: Any) -> DataFrame:
    """``job.transform.with_undeclared``'s columns, always null: the job as it
    was before undeclared keys were kept (the before side)."""
    return staged.select(
        "*",
        sf.lit(None).cast("string").alias(UNDECLARED_FIELDS),
        sf.lit(None).cast("array<string>").alias(UNDECLARED_KEYS),
    )


def prepare_before(raw: DataFrame, config: JobConfig) -> DataFrame:
    """``job.micro_batch.prepare`` without the undeclared-key capture."""
    with mock.patch.object(transform, "with_undeclared", without_undeclared):
        return prepare(raw, config)


def baseline(spark: SparkSession, source: Path) -> DataFrame:
    """Bare Spark: parse, drop duplicate ids (the same columns as the table);
    :func:`write_parquet` writes it."""
    return bare_plan(spark.read.parquet(str(source)))


def bare_plan(raw: DataFrame) -> DataFrame:
    """:func:`baseline`'s plan on any frame of source rows (a micro-batch too)."""
    schema = StructType(
        [StructField(n, StringType()) for n in ("id", "type", "occurredAt", "payload")]
    )
    parsed = raw.select(
        sf.from_json(sf.col("data").cast("string"), schema).alias("e"),
        "streamName",
        "shardId",
        "sequenceNumber",
        "partitionKey",
        "approximateArrivalTimestamp",
    )
    rows = parsed.where(sf.col("e.id").isNotNull()).select(
        sf.col("e.id").alias("id"),
        sf.col("e.type").alias("type"),
        sf.try_to_timestamp(sf.col("e.occurredAt")).alias("occurred_at"),
        sf.col("e.occurredAt").alias("occurred_at_raw"),
        sf.col("e.payload").alias("payload"),
        sf.col("streamName").alias("stream_name"),
        sf.col("shardId").alias("shard_id"),
        sf.col("sequenceNumber").alias("sequence_number"),
        sf.col("partitionKey").alias("partition_key"),
        sf.col("approximateArrivalTimestamp").alias("arrival_time"),
        sf.lit(0).cast("bigint").alias("batch_id"),
    )
    return rows.dropDuplicates(["id"])


def write_parquet(frame: DataFrame, out: Path) -> None:
    frame.write.mode("overwrite").parquet(str(out))


def _noop(frame: DataFrame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def phases(
    raw: DataFrame, config: JobConfig, kafka: KafkaSettings, table: Table, batch_id: int
) -> dict[str, float]:
    """The micro-batch's steps as cumulative actions (each runs the batch from
    the input file up to that step, with the job's own functions), so each
    step's cost is a difference of two of them."""
    # Built before the clock starts, as the job builds them once (job.driver).
    classified = classify(raw, fields=config.event_fields, max_record_bytes=config.max_record_bytes)
    prepared = prepare(raw, config)

    def files(write_files: bool) -> list[Any]:
        return one_pass(
            prepared, batch_id, config=config, kafka=kafka, table=table, write_files=write_files
        ).data_files

    took: dict[str, float] = {}
    took["classify"] = timed(lambda: _noop(classified))
    took["prepare"] = timed(lambda: _noop(prepared))
    took["pass_failures"] = timed(lambda: files(write_files=False))
    written: list[Any] = []
    took["pass_all"] = timed(lambda: written.extend(files(write_files=True)))
    took["commit"] = timed(
        lambda: commit_batch(
            table,
            written,
            query_id="bench-throughput-phases",
            batch_id=batch_id,
            options=config.catalog,
        )
    )
    return took


def run(ctx: Context) -> None:
    # Both sides as one micro-batch of a streaming query runs.
    spark = micro_batch_session(ctx.spark)
    # --quick (the smoke test): a small batch, one warm-up, one timed repeat.
    count = 2_000 if ctx.quick else 200_000
    repeats = ctx.timed_rounds
    work = ctx.scratch(NAME)
    source = work / "source"
    write_batch_files(source, mixed_records(count, "tp", undeclared_share=UNDECLARED_SHARE), now())
    config = job_config(ctx, NAME)
    kafka = kafka_settings(config)
    processor = BatchProcessor(config, kafka, query_id="bench-throughput")
    _ = processor.table  # created before the clock starts, as at the job's start
    before_config = job_config(ctx, f"{NAME}_before")
    before_processor = BatchProcessor(
        before_config, kafka_settings(before_config), query_id="bench-throughput-before"
    )
    _ = before_processor.table
    phase_table = ensure_table(job_config(ctx, f"{NAME}_phases"))

    def raw() -> DataFrame:
        return spark.read.parquet(str(source))

    # Both plans built once, as a streaming query builds its plan once: the
    # job's prepare() at start (job.driver), then per batch only the pass and
    # the commit (what process_batch builds).
    bare = baseline(spark, source)
    prepared = prepare(raw(), config)
    prepared_before = prepare_before(raw(), before_config)
    # Warm-up (JIT, Python workers, Kafka producer, catalog), not counted.
    warmups = 1 if ctx.quick else WARMUP_BATCHES
    for warm in range(warmups):
        write_parquet(bare, work / "warm")
        processor.process_batch(prepared, warm)
        before_processor.process_batch(prepared_before, warm)
    # The steps' own plans (classify alone, prepare alone, ...) once untimed
    # too: cold, the first repeat's steps broke the batch down wrongly.
    phases(raw(), config, kafka, phase_table, 0)

    ours: list[float] = []
    base: list[float] = []
    before: list[float] = []
    loads: list[float] = []
    steps: list[dict[str, float]] = []
    for rep in range(repeats):
        batch_id = warmups + rep  # batch ids only grow: a smaller one is a replay
        sides: list[Callable[[], None]] = [
            lambda: base.append(timed(lambda: write_parquet(bare, work / "baseline"))),
            lambda: before.append(
                timed(lambda: before_processor.process_batch(prepared_before, batch_id))  # noqa: B023
            ),
            lambda: ours.append(timed(lambda: processor.process_batch(prepared, batch_id))),  # noqa: B023
        ]
        for side in sides[rep % 3 :] + sides[: rep % 3]:  # each side leads once in 3
            side()
        loads.append(os.getloadavg()[0])
        steps.append(phases(raw(), config, kafka, phase_table, batch_id))
    med = statistics.median

    def step(name: str) -> float:
        return float(med(s[name] for s in steps))

    breakdown = {
        "parse_validate": step("classify"),
        "deduplicate": max(0.0, step("prepare") - step("classify")),
        "to_python_and_failures": max(0.0, step("pass_failures") - step("prepare")),
        "data_files": max(0.0, step("pass_all") - step("pass_failures")),
        "commit": step("commit"),
    }
    breakdown["other (driver)"] = max(0.0, med(ours) - sum(breakdown.values()))
    ratios = [b / o for b, o in zip(base, ours, strict=True)]
    ratio = med(base) / med(ours)
    before_ratios = [b / o for b, o in zip(base, before, strict=True)]
    before_ratio = med(base) / med(before)
    # Per repeat, each side against the baseline run next to it, then the median.
    change = med(a / b - 1 for a, b in zip(ratios, before_ratios, strict=True))
    capture_met = change >= -CAPTURE_BAR and ratio >= BAR
    write_result(
        ctx,
        NAME,
        {
            "what": __doc__,
            "records": count,
            "mix": {
                "malformed_share": 0.02,
                "duplicate_share": 0.05,
                "undeclared_key_share": UNDECLARED_SHARE,
            },
            "subject_seconds": summary(ours),
            "before_seconds": summary(before),
            "baseline_seconds": summary(base),
            "load_average_1min": [round(x, 2) for x in loads],
            "subject_records_per_second": round(count / med(ours), 1),
            "baseline_records_per_second": round(count / med(base), 1),
            "ratio_baseline_to_subject": {
                "of_medians": round(ratio, 3),
                "per_repeat": [round(r, 3) for r in ratios],
                "bar": f">= {BAR}",
                "met": ratio >= BAR,
            },
            "undeclared_key_capture": {
                "what": (
                    "the subject's ratio against the before side's (the same job "
                    "without undeclared-key capture), per repeat, median"
                ),
                "before_ratio_of_medians": round(before_ratio, 3),
                "before_per_repeat": [round(r, 3) for r in before_ratios],
                "change": round(change, 4),
                "bar": f">= -{CAPTURE_BAR:.0%} and subject >= {BAR}x",
                "met": capture_met,
            },
            "breakdown_seconds_median": {k: round(v, 3) for k, v in breakdown.items()},
            "breakdown_method": (
                "each step of the job's micro-batch as a cumulative Spark action from the "
                "input file, with the job's own functions, after each repeat of the whole "
                "batch: parse_validate = classify() to Spark's noop sink; deduplicate = "
                "prepare() (classify + dropDuplicates by key) to noop, minus parse_validate; "
                "to_python_and_failures = the job's one pass (output_rows + batch_task via "
                "mapInArrow) with the data files switched off: the Arrow hand-off to the "
                "Python workers, the split and the failures to the broker, minus prepare; "
                "data_files = the same pass writing the Iceberg data files, minus the pass "
                "without them; commit = commit_batch of those files (a second table); "
                "other = the whole process_batch minus the sum (driver work)"
            ),
            "phase_runs_seconds": {name: summary([s[name] for s in steps]) for name in steps[0]},
        },
    )
    with figure(ctx, NAME, ncols=2) as (_, axes):
        bars(
            axes[0],
            ["bare Spark", "before", "micro-batch"],
            [med(base), med(before), med(ours)],
            f"{count:,} records (median of {repeats})",
            "seconds",
        )
        bars(
            axes[1],
            list(breakdown),
            list(breakdown.values()),
            "where the micro-batch's time goes",
            "seconds",
        )
