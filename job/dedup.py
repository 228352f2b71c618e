"""De-duplication whose per-batch cost does not grow with the ids it holds.

Spark's ``dropDuplicatesWithinWatermark`` finds its expired ids by scanning
every id it holds, at the end of every batch and again in the no-data batch
that follows (``evictDupInfoFromState``, Spark 4.0 and 4.1): at the example
cluster's rate and horizon the scans alone outlast the trigger. This module
plans the same rule on ``transformWithState`` instead, with a small JVM
``StatefulProcessor`` (``jvm/src/streaming/dedup``, in the job's jar,
:mod:`model.jvm`). Its grouping key is one of :data:`BUCKETS` buckets of
ids; per bucket it keeps each id's horizon end in a map (a point read, which
RocksDB's bloom filters answer for a new id whatever the ids held) and, per
batch and expiry slot, one event-time timer with the ids it forgets. Spark
keeps timers in an index ordered by time and walks it only up to the first one
the watermark has not passed, so a batch costs what it brings and what
expires. Buckets, not one timer per id: Spark's timer registration costs about
three state accesses per call, and per id it made the batch 1.6x the built-in
operator's on 200,000 ids (docs/job.md, "De-duplication").

Why the JVM and not a Python processor: the row-based Python
``transformWithState`` of Spark 4.1 measured 2.3-2.6 s per 10,000-id batch on
the 2-core machine, 5x the built-in operator, because every key is a Python call
and every state access a round trip to the JVM (docs/job.md, "De-duplication").

Meaning kept from the built-in operator: an id is remembered for the horizon
measured on Kinesis arrival time (never the clock: a job that stopped for hours
sees an original and its re-send minutes apart, as they arrived); the watermark
runs on arrival time with a delay of the horizon, which is at least the stream's
retention, so no record the stream can still return is late; of several rows
of one new id in a batch, the earliest arrival passes.

"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from job.java_classes import jvm_class
from model.record import ARRIVAL, DATA, REASON, SEQUENCE, SHARD, STREAM, SUB_SEQUENCE

# Buckets of ids, the processor's grouping key: fixed for a checkpoint's life
# (the state is keyed by them: a change needs the move to a new checkpoint,
# docs/operate.md, which the checkpoint check cannot tell). Spark hashes them again onto the shuffle
# partitions: with 4,096 the busiest of the example cluster's 20 partitions
# gets 1.06x the mean (1,024 buckets: 1.25x; docs/sizing.md). A bucket pays
# one timer per batch for the new ids it brings, shared by ~50 ids per
# bucket at 200,000 records a batch, by ~2 at 10,000.
BUCKETS: Final = 4096
ENTRY_CLASS: Final = "streaming.dedup.ArrivalDedup"
_MS_PER_HOUR: Final = 3_600_000
# The state store's de-duplication key (never a table column).
DEDUP_KEY: Final = "_dedup_key"


def arrival_deduplicated(
    frame: DataFrame,
    *,
    key_column: str,
    arrival_column: str,
    horizon_hours: int,
    seed: DataFrame | None = None,
) -> DataFrame:
    """``frame`` (streaming, keyed) with one row per key within the horizon.

    ``seed`` (static; ``key_column`` and ``arrival_column``) fills the state of
    a NEW checkpoint with ids already stored, so that a job moved to a new
    checkpoint drops their re-sends too (docs/operate.md, "Moving to the timer
    de-duplication"); Spark reads it in the first batch only.
    """
    spark = frame.sparkSession
    entry = jvm_class(spark, ENTRY_CLASS)
    watermarked = frame.withWatermark(arrival_column, f"{horizon_hours} hours")
    horizon_ms = horizon_hours * _MS_PER_HOUR
    if seed is None:
        planned = entry.apply(watermarked._jdf, key_column, arrival_column, horizon_ms, BUCKETS)
    else:
        planned = entry.applyWithSeed(
            watermarked._jdf, key_column, arrival_column, horizon_ms, BUCKETS,
            seed._jdf, key_column, arrival_column,
        )  # fmt: skip
    return DataFrame(planned, spark)


def dedup_key(id_column: str) -> Column:
    """What the state store de-duplicates on: the event id for a valid record;
    the source coordinates for a failure, so two different bad records are
    never merged (each must reach the failure topic) while a replayed one is.
    A user record of a KPL aggregate adds its sub-sequence number (null, and
    so skipped by ``concat_ws``, for a plain record: those keys are unchanged)."""
    coordinates = sf.concat_ws(
        "/",
        sf.col(STREAM.source),
        sf.col(SHARD.source),
        sf.col(SEQUENCE.source),
        sf.col(SUB_SEQUENCE.source).cast("string"),
    )
    return (
        sf.when(sf.col(REASON).isNull(), sf.concat(sf.lit("id:"), sf.col(id_column)))
        .otherwise(sf.concat(sf.lit("src:"), coordinates))
        .alias(DEDUP_KEY)
    )


def deduplicated(
    classified: DataFrame,
    *,
    id_column: str,
    horizon_hours: int,
    seed: DataFrame | None = None,
) -> DataFrame:
    """The streaming plan's de-duplication: the first record of each key within
    ``horizon_hours`` of Kinesis arrival time passes, later ones are dropped.

    :func:`arrival_deduplicated` keeps each key in the state store
    (the RocksDB provider, :mod:`model.spark_conf`) with an event-time timer that
    forgets it once the watermark passes its arrival time plus the horizon; its
    hash exchange by key is the batch's only shuffle. The watermark runs on
    arrival time with a delay of the horizon, at least the stream's retention
    (``JobConfig`` enforces it, and the job checks the live stream at start), so
    no record the stream can still return is older than it.

    A valid row's original bytes are dropped before the exchange: only a
    failure record is sent with them (:func:`job.sinks.batch_task.output_rows`),
    and the bytes were half of what crossed the shuffle. This is the one place
    a valid row's bytes are dropped: the sink hands the batch on as it is.
    """
    keyed = dedup_input(classified, id_column)
    if not keyed.isStreaming:  # one static batch (tests, benchmarks): the same rule, no state
        return _first_per_key(keyed, [c for c in keyed.columns if c != DEDUP_KEY])
    unique = arrival_deduplicated(
        keyed,
        key_column=DEDUP_KEY,
        arrival_column=ARRIVAL.source,
        horizon_hours=horizon_hours,
        seed=seed,
    )
    return unique.drop(DEDUP_KEY)


def dedup_input(classified: DataFrame, id_column: str) -> DataFrame:
    """What crosses the de-duplication's exchange: the classified rows with
    their :func:`dedup_key`, and the original bytes of failure rows only."""
    slim = classified.withColumn(DATA, sf.when(sf.col(REASON).isNotNull(), sf.col(DATA)))
    return slim.select("*", dedup_key(id_column))


def _first_per_key(keyed: DataFrame, columns: Sequence[str]) -> DataFrame:
    """A static frame's ``dropDuplicates`` by key, with the row packed into one
    struct column. Spark plans it as a sort-based aggregate with one ``first``
    per column, evaluated without code generation: one struct instead of 14
    columns halved the de-duplication of 200,000 records (2.2 s -> 1.0 s)."""
    packed = keyed.select(DEDUP_KEY, sf.struct(*columns).alias("_row"))
    return packed.dropDuplicates([DEDUP_KEY]).select("_row.*")
