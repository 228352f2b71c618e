"""De-duplication in the state store, through a real streaming query.

Each micro-batch is one Parquet file of raw source rows (``maxFilesPerTrigger``
= 1), so the test decides what each batch holds and which Kinesis arrival
times it carries; the watermark advances between batches exactly as it does
behind the Kinesis source.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import functions as sf

from job.dedup import BUCKETS, dedup_key, deduplicated
from job.micro_batch import prepare
from job.sources.schema import SEQUENCE_NUMBER, SOURCE_SCHEMA, SUB_SEQUENCE_NUMBER
from job.transform import classify
from local.spark_stages import shuffles_of
from model.record import REASON
from tests.job.job_helpers import event, exchanges_in_plan, job_config, raw_frame, raw_rows

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _rows(records: list[bytes], *, shard: str, first_seq: int, arrival: datetime) -> list[Any]:
    naive = arrival.astimezone(UTC).replace(tzinfo=None)
    return [
        (*row[:4], naive, *row[5:]) for row in raw_rows(records, shard=shard, first_seq=first_seq)
    ]


def _run(
    spark: Any,
    tmp_path: Path,
    batches: list[list[Any]],
    on_batch: Callable[[Any, int], None] | None = None,
    first_index: int = 0,
    *,
    progress: list[dict[str, Any]] | None = None,
) -> list[list[dict[str, Any]]]:
    """``batches`` as files after any earlier ones (``first_index``), through the
    job's plan on the checkpoint under ``tmp_path`` (a restart when it exists);
    the query's progress events go to ``progress`` when given."""
    source = tmp_path / "source"
    for index, rows in enumerate(batches, start=first_index):
        spark.createDataFrame(rows, SOURCE_SCHEMA).coalesce(1).write.parquet(
            str(source / f"batch={index:03d}")
        )
        # One file per directory; the file source reads files, not directories.
        (file,) = (source / f"batch={index:03d}").glob("*.parquet")
        file.rename(source / f"{index:03d}.parquet")
    config = job_config(database="dedup", bootstrap="127.0.0.1:1")
    seen: dict[int, list[dict[str, Any]]] = {}

    def collect(frame: Any, batch_id: int) -> None:
        if on_batch is not None:
            on_batch(frame, batch_id)
        seen[batch_id] = [r.asDict() for r in frame.collect()]

    stream = (
        spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    )
    query = (
        prepare(stream, config)
        .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .foreachBatch(collect)
        .start()
    )
    try:
        # True once an availableNow query has read every file and stopped;
        # False when the bound ran out (a hung query), which must fail here.
        assert query.awaitTermination(300) is True, "the query did not finish within 300 s"
        assert query.exception() is None
        if progress is not None:
            progress.extend(json.loads(event.json) for event in query.recentProgress)
    finally:
        query.stop()
    return [seen[k] for k in sorted(seen)]


def test_a_shard_hours_behind_loses_nothing_and_resent_ids_are_dropped(
    spark: Any, tmp_path: Path
) -> None:
    ahead = _rows([event("a"), event("b")], shard="shard-1", first_seq=1, arrival=NOW)
    # The other shard's backlog: arrived 20 h before the records already seen
    # (within the stream's 24 h retention), so the watermark (24 h behind the
    # newest arrival) must let every one of them through.
    behind = _rows(
        [event("c"), event("d"), b"bad", event("a")],
        shard="shard-2",
        first_seq=1,
        arrival=NOW - timedelta(hours=20),
    )
    later = _rows(
        [event("b"), event("e"), b"bad"],
        shard="shard-1",
        first_seq=3,
        arrival=NOW + timedelta(minutes=5),
    )
    # Spark adds a no-data batch when the watermark moved (to evict state).
    batches = [b for b in _run(spark, tmp_path, [ahead, behind, later]) if b]

    valid = [[r["id"] for r in batch if r[REASON] is None] for batch in batches]
    assert [sorted(ids) for ids in valid] == [["a", "b"], ["c", "d"], ["e"]], (
        "the backlog's ids pass; 'a' and 'b' re-sent later are dropped"
    )
    failures = [(r["shardId"], r["sequenceNumber"]) for b in batches for r in b if r[REASON]]
    assert sorted(failures) == [("shard-1", "5"), ("shard-2", "3")], (
        "two bad records with the same bytes are two failures"
    )


def test_a_streaming_micro_batch_runs_one_shuffle_without_adaptive_execution(
    spark: Any, tmp_path: Path
) -> None:
    """Spark 4.1 plans stateless streaming batches adaptively
    (``spark.sql.adaptive.streaming.stateless.enabled``); the job's query is
    stateful and model/spark_conf.py pins that off too, so each micro-batch runs
    in a session without AQE, and its one shuffle is the state store's exchange."""
    seen: list[tuple[int, str, int]] = []

    def measure(frame: Any, batch_id: int) -> None:
        adaptive = frame.sparkSession.conf.get("spark.sql.adaptive.enabled")
        seen.append((batch_id, adaptive, shuffles_of(spark, frame.collect)))

    first = _rows([event("a"), event("a"), b"bad"], shard="shard-1", first_seq=1, arrival=NOW)
    second = _rows([event("a"), event("b")], shard="shard-1", first_seq=4, arrival=NOW)
    _run(spark, tmp_path, [first, second], on_batch=measure)
    assert spark.conf.get("spark.sql.adaptive.streaming.stateless.enabled") == "false"
    data_batches = [entry for entry in seen if entry[0] in (0, 1)]
    assert data_batches == [(0, "false", 1), (1, "false", 1)], seen


def _valid_ids(batches: list[list[dict[str, Any]]]) -> list[list[str]]:
    return [sorted(r["id"] for r in batch if r[REASON] is None) for batch in batches if batch]


def test_an_id_is_forgotten_when_arrival_time_passes_the_horizon_not_the_clock(
    spark: Any, tmp_path: Path
) -> None:
    """The timer follows the watermark, i.e. the records' arrival times: an id
    is remembered for 24 h of arrival time and forgotten after, within one
    test's few seconds of wall-clock time."""
    batches = [
        _rows([event("a")], shard="shard-1", first_seq=1, arrival=NOW),
        # 23 h later: within the horizon, dropped.
        _rows(
            [event("a"), event("b")],
            shard="shard-1",
            first_seq=2,
            arrival=NOW + timedelta(hours=23),
        ),
        # The watermark (newest arrival - 24 h) passes NOW + 24 h here ...
        _rows([event("c")], shard="shard-1", first_seq=4, arrival=NOW + timedelta(hours=49)),
        # ... so 'a' was forgotten and passes again, 'c' (a minute before) is held.
        _rows(
            [event("a"), event("c")],
            shard="shard-1",
            first_seq=5,
            arrival=NOW + timedelta(hours=49, minutes=1),
        ),
    ]
    assert _valid_ids(_run(spark, tmp_path, batches)) == [["a"], ["b"], ["c"], ["a"]]


def test_a_backlog_after_a_long_stop_cannot_let_a_resend_through(
    spark: Any, tmp_path: Path
) -> None:
    """The processing-time trap: the job stops for hours; when it catches up,
    an original and its re-send that arrived minutes apart must still meet.
    Here the query stops after the original, and the restarted query first
    reads 30 hours of another shard's backlog, then the re-send: expiry is on
    arrival time, so 30 h of backlog moved the watermark to NOW + 6 h only."""
    original = _rows([event("a")], shard="shard-1", first_seq=1, arrival=NOW)
    first = _run(spark, tmp_path, [original])
    later = [
        _rows([event("x")], shard="shard-2", first_seq=1, arrival=NOW + timedelta(hours=30)),
        _rows([event("a")], shard="shard-1", first_seq=2, arrival=NOW + timedelta(minutes=5)),
    ]
    after_restart = _run(spark, tmp_path, later, first_index=1)
    assert _valid_ids(first) == [["a"]]
    assert _valid_ids(after_restart) == [["x"]], "the re-send of 'a' is dropped"


def test_an_id_back_after_its_horizon_is_remembered_from_its_new_arrival(
    spark: Any, tmp_path: Path
) -> None:
    """'a' comes back 25 h after its first arrival: a new occurrence, which
    passes. The watermark (newest arrival - 24 h) has not fired the first
    timer yet: the processor records the new horizon's end, under a later
    timer; its re-send an hour later is within the NEW horizon and must be
    dropped, and the first timer, when it fires, must not forget the key: the
    latest horizon decides."""

    def batch(first_seq: int, hours: float, *ids: str) -> list[Any]:
        arrival = NOW + timedelta(hours=hours)
        return _rows([event(i) for i in ids], shard="shard-1", first_seq=first_seq, arrival=arrival)

    batches = [
        batch(1, 0, "a"),
        batch(2, 25, "a"),
        batch(3, 26, "a", "d"),
        # The watermark passes the first horizon's end (NOW + 24 h): a timer
        # left there would fire in the next batch and forget "a" ...
        batch(5, 48.5, "e"),
        batch(6, 48.6, "f"),
        # ... and this re-send, within the new horizon (to NOW + 49 h), would pass.
        batch(7, 48.7, "a", "g"),
    ]
    assert _valid_ids(_run(spark, tmp_path, batches)) == [["a"], ["a"], ["d"], ["e"], ["f"], ["g"]]


def test_ids_sharing_buckets_and_timers_are_forgotten_one_by_one(
    spark: Any, tmp_path: Path
) -> None:
    """5,000 ids in 4,096 buckets: most timers forget several ids, some of
    which came back after their horizon (a later end, under a later timer)
    and must stay. The state really shrinks by the ids forgotten: the
    processor's removed rows are those ids plus one entry per expired timer."""

    def batch(first_seq: int, hours: float, ids: list[str]) -> list[Any]:
        arrival = NOW + timedelta(hours=hours)
        return _rows([event(i) for i in ids], shard="shard-1", first_seq=first_seq, arrival=arrival)

    ids = [f"id-{n:04d}" for n in range(5000)]
    back = ids[:100]
    progress: list[dict[str, Any]] = []
    batches = [
        batch(1, 0, ids),
        batch(10_001, 25, back),  # after their horizon: new occurrences
        # The watermark (newest arrival - 24 h) passes NOW + 24 h: the first
        # batch's timers fire; the returned ids' horizons end at NOW + 49 h.
        batch(20_001, 48.4, ["push"]),
        batch(20_002, 48.45, ["push-2"]),
        batch(30_001, 48.5, ids),  # only the forgotten ones pass
    ]
    valid = _valid_ids(_run(spark, tmp_path, batches, progress=progress))
    assert valid == [ids, back, ["push"], ["push-2"], ids[100:]]
    forgotten = 0
    for event_ in progress:
        for state in event_["stateOperators"]:
            forgotten += state["numRowsRemoved"] - state["customMetrics"]["numExpiredTimers"]
    assert forgotten == 4900, "every id of the first batch but the 100 that came back"


def test_the_buckets_spread_evenly_over_the_shuffle_partitions(spark: Any) -> None:
    """Spark hashes the bucket again onto the shuffle partitions (Murmur3,
    seed 42, as ``hash``): the busiest partition's share of the buckets sets
    the state stage's slowest task. job/dedup.py gives these figures for the
    example cluster's 20 partitions (one per executor core)."""

    def busiest(buckets: int, partitions: int) -> float:
        key = sf.col("id").cast("int")
        rows = (
            spark.range(buckets)
            .groupBy(sf.pmod(sf.hash(key), sf.lit(partitions)).alias("partition"))
            .count()
            .collect()
        )
        assert len(rows) == partitions
        return max(row["count"] for row in rows) / (buckets / partitions)

    assert BUCKETS == 4096
    assert round(busiest(BUCKETS, 20), 2) == 1.06
    assert round(busiest(1024, 20), 2) == 1.25


# ----------------------------------------------------- the key and the static rule

MAX = 2_048


def _deduplicated(spark: Any, records: list[bytes], **kw: Any) -> Any:
    frame = classify(raw_frame(spark, records, **kw), max_record_bytes=MAX)
    return deduplicated(frame, id_column="id", horizon_hours=24)


def test_one_record_per_id_and_failures_are_never_merged(spark: Any) -> None:
    records = [event("a"), event("b"), event("a", payload={"v": 2}), b"bad", b"bad"]
    out = _deduplicated(spark, records).collect()
    assert sorted(r["id"] for r in out if r[REASON] is None) == ["a", "b"]
    # Two identical bad records at different positions are two failures.
    assert sorted(r["sequenceNumber"] for r in out if r[REASON] is not None) == ["4", "5"]
    assert "_dedup_key" not in _deduplicated(spark, records).columns


def test_only_failure_records_keep_their_bytes_across_the_shuffle(spark: Any) -> None:
    records = [event("a"), event("a"), b"bad"]
    out = _deduplicated(spark, records)
    classified = classify(raw_frame(spark, records), max_record_bytes=MAX)
    assert out.columns == classified.columns, "the packed row comes back in its order"
    rows = out.collect()
    assert [(r["id"], r["data"]) for r in rows if r[REASON] is None] == [("a", None)]
    assert [bytes(r["data"]) for r in rows if r[REASON] is not None] == [b"bad"]


def test_dedup_key_is_the_id_or_the_source_coordinates(spark: Any) -> None:
    frame = classify(raw_frame(spark, [event("a"), b"bad"]), max_record_bytes=MAX)
    keys = sorted(r[0] for r in frame.select(dedup_key("id")).collect())
    assert keys == ["id:a", "src:stream-a/shardId-000000000000/2"]


def test_two_failing_user_records_of_one_aggregate_keep_two_dedup_keys(spark: Any) -> None:
    raw = raw_frame(spark, [b"bad-1", b"bad-2"]).withColumn(SEQUENCE_NUMBER, sf.lit("7"))
    subs = raw.withColumn(SUB_SEQUENCE_NUMBER, sf.monotonically_increasing_id())
    frame = classify(subs, max_record_bytes=MAX)
    keys = sorted(r[0] for r in frame.select(dedup_key("id")).collect())
    assert len(set(keys)) == 2, keys
    assert all(k.startswith("src:stream-a/shardId-000000000000/7/") for k in keys), keys


def test_dedup_plan_has_exactly_one_exchange(spark: Any) -> None:
    out = _deduplicated(spark, [event("a"), event("a"), event("b"), b"bad"])
    before = out._jdf.queryExecution().executedPlan().toString()
    assert len(exchanges_in_plan(before)) == 1, before
    out.collect()
    after = out._jdf.queryExecution().executedPlan().toString()
    assert len(exchanges_in_plan(after)) == 1, after
