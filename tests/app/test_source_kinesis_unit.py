"""The Kinesis source's logic without Spark: options, retries, offsets, resharding.

The reader is driven the way Spark 4.0 drives a SimpleDataSourceStreamReader
(through pyspark's own prefetch wrapper: initialOffset, latestOffset,
partitions, getCache, commit; readBetweenOffsets on a replay) against
FakeKinesis, which behaves like the real service where moto does not (see
source_helpers.FakeKinesis).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import pytest
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper

from app.config import MIN_FETCH_TIME_SEC, ConfigError, JobConfig, SourceOptions
from app.sources.aws_kinesis import connector_options
from app.sources.kinesis_fetch import Backoff, ShardReader, call_with_backoff
from app.sources.kinesis_offsets import (
    ShardInfo,
    ShardState,
    offsets_from_json,
    readable_shards,
)
from app.sources.kinesis_options import parse_duration_ms, parse_options
from app.sources.kinesis_python import KinesisStreamReader
from app.sources.kpl import MAGIC
from app.sources.schema import SOURCE_COLUMNS
from tests.app.source_helpers import FakeKinesis, client_error, job_config

# ---------------------------------------------------------------- options


def test_connector_options_names_and_value_formats() -> None:
    config = job_config("orders", "http://127.0.0.1:4566", "/tmp/cp")
    assert connector_options(config) == {
        "kinesis.streamName": "orders",
        "kinesis.region": "us-east-1",
        "kinesis.kinesisRegion": "us-east-1",
        "kinesis.endpointUrl": "http://127.0.0.1:4566",
        "kinesis.startingPosition": "TRIM_HORIZON",
        "kinesis.describeShardInterval": "30s",
        "kinesis.maxFetchRecordsPerShard": "10000",
        "kinesis.maxFetchTimePerShardSec": "10",
        "kinesis.failOnDataLoss": "true",
        "kinesis.consumerType": "GetRecords",
    }


def test_connector_options_fill_public_endpoint_and_efo_consumer() -> None:
    efo = job_config("orders", "x", "/tmp/cp", consumer_type="SubscribeToShard", consumer_name="c1")
    config = JobConfig.from_dict(
        {**efo.to_dict(), "kinesis_endpoint_url": None, "region": "cn-north-1"}
    )
    options = connector_options(config)
    assert options["kinesis.endpointUrl"] == "https://kinesis.cn-north-1.amazonaws.com.cn"
    assert options["kinesis.consumerType"] == "SubscribeToShard"
    assert options["kinesis.consumerName"] == "c1"


def _raw_config(**source: Any) -> dict[str, Any]:
    """A job config document, not yet parsed, so a test can hand it to the parser."""
    return {
        "instance_id": "test-us-east-1",
        "region": "us-east-1",
        "stream_name": "orders",
        "database": "test_db",
        "checkpoint_location": "/tmp/cp",
        "kafka": {"topic": "failures", "bootstrap_servers": "127.0.0.1:9"},
        "source": source,
    }


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            {"consumer_type": "SubscribeToShard"},
            "source.consumer_name: bad value None; allowed: a consumer name",
        ),
        (
            {"max_fetch_time_per_shard_sec": 5},
            "source.max_fetch_time_per_shard_sec: bad value 5; allowed: an integer >= 10",
        ),
        (
            {"describe_shard_interval_sec": 0},
            "source.describe_shard_interval_sec: bad value 0; allowed: an integer > 0",
        ),
    ],
)
def test_the_config_rejects_what_the_connector_rejects(
    source: dict[str, Any], message: str
) -> None:
    """connector_options trusts its JobConfig; the model is where these are refused."""
    raw = _raw_config(**source)
    with pytest.raises(ConfigError) as caught:
        JobConfig.from_dict(raw)
    assert message in str(caught.value)


def test_the_config_accepts_the_connector_minimum_fetch_time() -> None:
    config = JobConfig.from_dict(_raw_config(max_fetch_time_per_shard_sec=MIN_FETCH_TIME_SEC))
    assert connector_options(config)["kinesis.maxFetchTimePerShardSec"] == "10"


def test_python_source_accepts_the_connector_options() -> None:
    config = job_config(
        "orders", "http://e", "/tmp/cp", starting_position="LATEST", max_fetch_records_per_shard=7
    )
    options = parse_options(connector_options(config))
    assert (options.stream_name, options.region, options.endpoint_url) == (
        "orders",
        "us-east-1",
        "http://e",
    )
    assert options.starting_position.kind == "LATEST"
    assert options.describe_shard_interval_ms == 30_000
    assert options.max_fetch_records_per_shard == 7
    assert options.fail_on_data_loss is True


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"kinesis.streamName": ""}, "kinesis.streamName"),
        ({"kinesis.consumerType": "SubscribeToShard"}, "kinesis.consumerName"),
        ({"kinesis.consumerType": "HTTP2Push"}, "kinesis.consumerType"),
        ({"kinesis.startingPosition": "OLDEST"}, "kinesis.startingPosition"),
        ({"kinesis.startingPosition": "AT_TIMESTAMP 2024-01-01T00:00:00"}, "offset"),
        ({"kinesis.describeShardInterval": "soon"}, "kinesis.describeShardInterval"),
        ({"kinesis.maxFetchRecordsPerShard": "0"}, "kinesis.maxFetchRecordsPerShard"),
        ({"kinesis.maxFetchTimePerShardSec": "9"}, "kinesis.maxFetchTimePerShardSec"),
        ({"kinesis.failOnDataLoss": "yes"}, "kinesis.failOnDataLoss"),
    ],
)
def test_python_source_rejects_bad_options(override: dict[str, str], message: str) -> None:
    options = {"kinesis.streamName": "s", "kinesis.region": "us-east-1", **override}
    with pytest.raises(ValueError, match=message):
        parse_options(options)


def test_python_source_defaults_are_the_job_config_defaults() -> None:
    """A direct format("python-kinesis") user who sets only the stream reads
    like the job with a default config does."""
    job = SourceOptions()
    options = parse_options({"kinesis.streamName": "s", "kinesis.region": "us-east-1"})
    assert options.starting_position.kind == job.starting_position
    assert options.describe_shard_interval_ms == job.describe_shard_interval_sec * 1000
    assert options.max_fetch_records_per_shard == job.max_fetch_records_per_shard
    assert options.max_fetch_time_per_shard_sec == job.max_fetch_time_per_shard_sec
    assert options.fail_on_data_loss is job.fail_on_data_loss is True


def test_starting_position_at_timestamp_and_durations() -> None:
    options = parse_options(
        {
            "KINESIS.STREAMNAME": "s",
            "kinesis.region": "eu-west-1",
            "kinesis.startingPosition": "AT_TIMESTAMP 2023-08-30T19:00:05-08:00",
        }
    )
    assert options.starting_position.kind == "AT_TIMESTAMP"
    assert (
        options.starting_position.timestamp
        == datetime(2023, 8, 31, 3, 0, 5, tzinfo=UTC).timestamp()
    )
    assert [parse_duration_ms("x", v) for v in ("250", "100ms", "30s", "2m")] == [
        250,
        100,
        30_000,
        120_000,
    ]


# ---------------------------------------------------------------- retries


def test_backoff_retries_throttling_with_bounded_full_jitter() -> None:
    sleeps: list[float] = []
    outcomes: list[Any] = [
        client_error("ProvisionedThroughputExceededException"),
        client_error("LimitExceededException"),
        client_error("ProvisionedThroughputExceededException"),
        "ok",
    ]

    def call() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    result = call_with_backoff(call, Backoff(5, 100, 250), sleeps.append, lambda: 1.0)
    assert result == "ok"
    assert sleeps == [0.1, 0.2, 0.25]  # doubled, then capped at the maximum


def test_backoff_gives_up_after_the_retry_budget_and_skips_other_errors() -> None:
    calls = []

    def throttled() -> None:
        calls.append(1)
        raise client_error("ProvisionedThroughputExceededException")

    with pytest.raises(Exception, match="ProvisionedThroughputExceeded"):
        call_with_backoff(throttled, Backoff(2, 1, 1), lambda _s: None, lambda: 0.5)
    assert len(calls) == 3

    sleeps: list[float] = []

    def denied() -> None:
        raise client_error("AccessDeniedException")

    with pytest.raises(Exception, match="AccessDenied"):
        call_with_backoff(denied, Backoff(5, 1, 1), sleeps.append, lambda: 0.5)
    assert sleeps == []


def _options(**override: str) -> Any:
    return parse_options(
        {
            "kinesis.streamName": "s",
            "kinesis.region": "us-east-1",
            "kinesis.describeShardInterval": "0ms",
            "kinesis.getRecords.fetchIntervalMs": "0",
            "kinesis.clientRetryIntervalsMs": "1",
            **override,
        }
    )


def test_read_survives_throttling_and_expired_iterators_without_loss_or_repeat() -> None:
    fake = FakeKinesis(shards=1, page_size=10)
    fake.put("shardId-000000000000", *[f"r{i}" for i in range(35)])
    sleeps: list[float] = []
    reader = ShardReader(fake, _options(), sleep=sleeps.append)
    end = fake.shards["shardId-000000000000"]["records"][-1]["SequenceNumber"]
    fake.failures = [client_error("ProvisionedThroughputExceededException")]
    seen = []
    for record in reader.read_range("shardId-000000000000", ShardState(), end):
        seen.append(record["PartitionKey"])
        if len(seen) in (10, 25):  # iterators age out between pages
            fake.expire_iterators()
    assert seen == [f"r{i}" for i in range(35)]
    assert len(sleeps) == 1  # the throttled call (the first GetShardIterator)
    assert fake.calls["get_shard_iterator"] == 4  # throttled, first, one per expiry


# ---------------------------------------------------------------- offsets


def test_child_waits_until_every_listed_parent_is_done() -> None:
    shards = [
        ShardInfo("p1", closed=True),
        ShardInfo("p2", closed=True),
        ShardInfo("c", parents=("p1", "p2")),
        ShardInfo("orphan", parents=("expired",)),
    ]
    states = {"p1": ShardState(done=True), "p2": ShardState(after="5")}
    assert [s.shard_id for s in readable_shards(states, shards)] == ["orphan", "p2"]
    states["p2"] = ShardState(after="9", done=True)
    assert [s.shard_id for s in readable_shards(states, shards)] == ["c", "orphan"]


def _reader(fake: FakeKinesis, **options: str) -> KinesisStreamReader:
    parsed = _options(**options)
    reader = KinesisStreamReader(parsed)
    reader._reader = ShardReader(fake, parsed, sleep=lambda _s: None)
    return reader


def _as_spark(reader: KinesisStreamReader) -> _SimpleStreamReaderWrapper:
    """The reader as Spark 4.0 drives it: wrapped in pyspark's prefetch cache
    (what pyspark.sql.streaming.python_streaming_source_runner calls)."""
    return _SimpleStreamReaderWrapper(reader)


def _rows(batches: Iterable[Any]) -> list[tuple[Any, ...]]:
    """Arrow batches as Spark receives them, as tuples of SOURCE_COLUMNS."""
    found = []
    for batch in batches:
        assert batch.schema.names == list(SOURCE_COLUMNS)
        found.extend(tuple(row[name] for name in SOURCE_COLUMNS) for row in batch.to_pylist())
    return found


def _run(
    spark: _SimpleStreamReaderWrapper, start: dict[str, Any]
) -> tuple[list[list[tuple[Any, ...]]], dict[str, Any]]:
    """Batches as Spark plans them until no new offset appears: latestOffset
    (which reads), then the partitions and the cached rows of (start, end],
    then the commit."""
    batches: list[list[tuple[Any, ...]]] = []
    for _ in range(100):
        end = spark.latestOffset()
        if end == start:
            return batches, start
        assert len(spark.partitions(start, end)) == 1
        cached = spark.getCache(start, end)
        assert cached is not None, "the rows read by latestOffset are cached for the batch"
        batches.append(_rows(cached))
        spark.commit(end)
        start = end
    raise AssertionError("the source never caught up")


def _keys(batches: list[list[tuple[Any, ...]]]) -> list[str]:
    return [row[2] for rows in batches for row in rows]


def _span(batches: list[list[tuple[Any, ...]]], shard: str) -> tuple[int, int]:
    """First and last batch holding a record of ``shard``."""
    found = [n for n, rows in enumerate(batches) if any(row[5] == shard for row in rows)]
    assert found, f"no batch read {shard}"
    return min(found), max(found)


A_SHARD, B_SHARD = "shardId-000000000000", "shardId-000000000001"


def _twelve_and_three_read_five_at_a_time() -> tuple[FakeKinesis, _SimpleStreamReaderWrapper]:
    """Two shards holding a0..a11 and b0..b2 (pages of 4), read at most 5 per
    shard per batch: the reader over them."""
    fake = FakeKinesis(shards=2, page_size=4)
    fake.put(A_SHARD, *[f"a{i}" for i in range(12)])
    fake.put(B_SHARD, *[f"b{i}" for i in range(3)])
    return fake, _as_spark(_reader(fake, **{"kinesis.maxFetchRecordsPerShard": "5"}))


def test_each_record_is_fetched_once_in_bounded_batches() -> None:
    fake, spark = _twelve_and_three_read_five_at_a_time()
    a = A_SHARD
    batches, _ = _run(spark, spark.initialOffset())
    assert sorted(_keys(batches)) == sorted(
        [f"a{i}" for i in range(12)] + [f"b{i}" for i in range(3)]
    )
    assert set(fake.served.values()) == {1}  # GetRecords returned each record once
    assert [len([r for r in rows if r[5] == a]) for rows in batches] == [5, 5, 2]
    put = fake.shards[a]["records"][0]
    [row] = [row for rows in batches for row in rows if row[2] == "a0"]
    assert row == (
        b"a0", "s", "a0", put["SequenceNumber"], put["ApproximateArrivalTimestamp"], a, None
    )  # fmt: skip


def test_an_open_shard_caught_up_ends_its_batch_without_another_call() -> None:
    fake = FakeKinesis(shards=1)
    fake.put("shardId-000000000000", "x", "y")
    spark = _as_spark(_reader(fake))
    start = spark.initialOffset()
    end = spark.latestOffset()
    assert [row[2] for row in _rows(spark.getCache(start, end))] == ["x", "y"]
    assert fake.calls["get_records"] == 1  # MillisBehindLatest 0 on the page with x, y


def test_split_and_merge_read_every_record_once_parents_before_children() -> None:
    fake, spark = _twelve_and_three_read_five_at_a_time()
    a, b = A_SHARD, B_SHARD
    batches, start = _run(spark, spark.initialOffset())

    fake.put(a, *[f"a-late{i}" for i in range(7)])  # unread when the shard splits
    left, right = fake.split(a)
    fake.put(left, *[f"l{i}" for i in range(6)])
    fake.put(right, *[f"r{i}" for i in range(2)])
    merged = fake.merge(left, b)
    fake.put(merged, *[f"m{i}" for i in range(4)])
    more, start = _run(spark, start)
    batches += more

    expected = (
        [f"a{i}" for i in range(12)]
        + [f"b{i}" for i in range(3)]
        + [f"a-late{i}" for i in range(7)]
        + [f"l{i}" for i in range(6)]
        + [f"r{i}" for i in range(2)]
        + [f"m{i}" for i in range(4)]
    )
    assert sorted(_keys(batches)) == sorted(expected)  # nothing lost, nothing twice
    assert set(fake.served.values()) == {1}
    assert _span(batches, a)[1] < _span(batches, left)[0]
    assert _span(batches, a)[1] < _span(batches, right)[0]
    assert max(_span(batches, left)[1], _span(batches, b)[1]) < _span(batches, merged)[0]
    assert offsets_from_json(start)[a].done


def test_merge_child_waits_for_the_slower_parent() -> None:
    """MergeShards on its own. Not against moto: its MergeShards copies both
    parents' records into the child (moto/kinesis/models.py, merge_shards),
    which local.moto_server does not patch, so every parent record would be
    read twice there; FakeKinesis keeps them in the closed parents, as
    Kinesis does."""
    fake = FakeKinesis(shards=2, page_size=3)
    fast, slow = "shardId-000000000000", "shardId-000000000001"
    fake.put(fast, "f0", "f1")
    fake.put(slow, *[f"s{i}" for i in range(11)])  # 3 batches of 4 records
    child = fake.merge(fast, slow)
    fake.put(child, *[f"c{i}" for i in range(6)])
    spark = _as_spark(_reader(fake, **{"kinesis.maxFetchRecordsPerShard": "4"}))
    batches, end = _run(spark, spark.initialOffset())

    assert sorted(_keys(batches)) == sorted(
        ["f0", "f1"] + [f"s{i}" for i in range(11)] + [f"c{i}" for i in range(6)]
    )
    assert set(fake.served.values()) == {1}
    assert _span(batches, fast) == (0, 0)
    assert _span(batches, slow) == (0, 2)
    # The fast parent finished in batch 0; the child still waits for the slow one.
    assert _span(batches, child)[0] == _span(batches, slow)[1] + 1
    assert [row[2] for row in batches[-1]] == ["c4", "c5"]  # 4 per batch in the child too
    offsets = offsets_from_json(end)
    assert offsets[fast].done and offsets[slow].done and not offsets[child].done


def test_a_closed_shard_is_finished_only_by_an_empty_page_on_moto() -> None:
    """moto: a closed shard keeps its iterator, and MillisBehindLatest can be
    0 with records left; neither may end the parent early (its children would
    start while it still holds records)."""
    fake = FakeKinesis(shards=1, page_size=2, moto_closed_iterators=True, moto_lag=True)
    parent = "shardId-000000000000"
    fake.put(parent, *[f"p{i}" for i in range(5)])
    left, _ = fake.split(parent)
    fake.put(left, "l0")
    spark = _as_spark(_reader(fake))
    batches, end = _run(spark, spark.initialOffset())
    assert _keys(batches) == [f"p{i}" for i in range(5)] + ["l0"]
    assert _span(batches, parent) == (0, 0)
    assert _span(batches, left) == (1, 1)
    assert offsets_from_json(end)[parent].done


def test_replay_after_a_restart_returns_the_same_rows_and_resumes() -> None:
    fake = FakeKinesis(shards=2, page_size=3)
    a, b = "shardId-000000000000", "shardId-000000000001"
    fake.put(a, *[f"x{i}" for i in range(8)])
    fake.put(b, "b0", "b1")
    reader = _reader(fake, **{"kinesis.maxFetchRecordsPerShard": "5"})
    spark = _as_spark(reader)
    start = spark.initialOffset()
    end = spark.latestOffset()
    first = _rows(spark.getCache(start, end))
    fake.put(a, *[f"y{i}" for i in range(4)])  # arrives before the replay

    # The query dies before the commit; on restart Spark replays (start, end]
    # in an executor, which gets a pickled reader and no cache.
    replica = pickle.loads(pickle.dumps(reader))
    assert replica._reader is None and replica._initial is None
    replica._reader = ShardReader(fake, replica.options, sleep=lambda _s: None)
    assert _rows(replica.readBetweenOffsets(start, end)) == first
    assert [row[2] for row in first] == [f"x{i}" for i in range(5)] + ["b0", "b1"]

    # The restarted driver: Spark calls partitions(latest, latest) first
    # (AcceptsLatestSeenOffset), finds nothing cached, then reads on from there.
    restarted = _as_spark(replica)
    restarted.partitions(end, end)
    assert restarted.getCache(start, end) is None
    batches, _ = _run(restarted, end)
    assert _keys(batches) == [f"x{i}" for i in range(5, 8)] + [f"y{i}" for i in range(4)]


def test_latest_starts_after_existing_records_and_is_pinned_for_replays() -> None:
    fake = FakeKinesis(shards=1)
    shard = "shardId-000000000000"
    fake.put(shard, "old1", "old2")
    reader = _reader(fake, **{"kinesis.startingPosition": "LATEST"})
    start = reader.initialOffset()
    assert reader.initialOffset() == start  # the same pin when asked twice
    rows, idle = reader.read(start)
    assert _rows(rows) == [] and idle is start  # idle triggers share the offset
    fake.put(shard, "new1", "new2")
    batches, _ = _run(_as_spark(reader), start)
    assert _keys(batches) == ["new1", "new2"]


def test_vanished_shard_fails_the_query_only_with_fail_on_data_loss() -> None:
    fake = FakeKinesis(shards=2)
    strict = _reader(fake, **{"kinesis.failOnDataLoss": "true"})
    lenient = _reader(fake, **{"kinesis.failOnDataLoss": "false"})
    strict_start = strict.initialOffset()
    lenient_start = lenient.initialOffset()
    del fake.shards["shardId-000000000001"]
    with pytest.raises(RuntimeError, match="shardId-000000000001"):
        strict.read(strict_start)
    _, end = lenient.read(lenient_start)
    assert offsets_from_json(end)["shardId-000000000001"].done


# ---------------------------------------------------------------- KPL aggregation


def _aggregate(key: str, *values: str) -> bytes:
    """An aggregate made by awslabs' aggregator; user record ``v`` has key ``k-v``."""
    from aws_kinesis_agg.aggregator import RecordAggregator  # type: ignore[import-untyped]

    aggregator = RecordAggregator()
    for value in values:
        aggregator.add_user_record(f"k-{value}", value.encode())
    data = bytes(aggregator.clear_and_get().get_contents()[2])
    assert data.startswith(MAGIC), key
    return data


def _user_rows(batches: list[list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    """(data, partition key, sequence number, shard, sub-sequence) of every row."""
    return [(row[0], row[2], row[3], row[5], row[6]) for rows in batches for row in rows]


def test_an_aggregate_of_one_becomes_one_row_with_sub_sequence_zero() -> None:
    fake = FakeKinesis(shards=1)
    a = "shardId-000000000000"
    seq = fake.put_bytes(a, _aggregate("p", "u0"), "outer-key")
    spark = _as_spark(_reader(fake))
    batches, _ = _run(spark, spark.initialOffset())
    assert _user_rows(batches) == [(b"u0", "k-u0", seq, a, 0)]


def test_aggregates_mixed_with_plain_records_across_shards_keep_order_and_coordinates() -> None:
    fake = FakeKinesis(shards=2, page_size=3)
    a, b = "shardId-000000000000", "shardId-000000000001"
    p0 = fake.put_bytes(a, b"plain-0", "pk-plain-0")
    g1 = fake.put_bytes(a, _aggregate("g1", *[f"a{i}" for i in range(5)]), "outer")
    p2 = fake.put_bytes(a, b"plain-2", "pk-plain-2")
    g3 = fake.put_bytes(b, _aggregate("g3", "b0", "b1"), "outer")
    p4 = fake.put_bytes(b, b"plain-4", "pk-plain-4")
    g5 = fake.put_bytes(b, _aggregate("g5", "b2"), "outer")
    spark = _as_spark(_reader(fake))
    batches, _ = _run(spark, spark.initialOffset())
    rows = _user_rows(batches)
    assert [r for r in rows if r[3] == a] == [
        (b"plain-0", "pk-plain-0", p0, a, None),
        *[(f"a{i}".encode(), f"k-a{i}", g1, a, i) for i in range(5)],
        (b"plain-2", "pk-plain-2", p2, a, None),
    ]
    assert [r for r in rows if r[3] == b] == [
        (b"b0", "k-b0", g3, b, 0),
        (b"b1", "k-b1", g3, b, 1),
        (b"plain-4", "pk-plain-4", p4, b, None),
        (b"b2", "k-b2", g5, b, 0),
    ]
    # Every row's source coordinates are its own.
    assert len({(r[3], r[2], r[4]) for r in rows}) == len(rows) == 7 + 4


def test_a_corrupt_aggregate_is_one_row_with_its_bytes_and_nothing_else_is_lost() -> None:
    fake = FakeKinesis(shards=1)
    a = "shardId-000000000000"
    good = _aggregate("g", "u0", "u1")
    broken = good[:-1] + bytes([good[-1] ^ 1])
    fake.put_bytes(a, _aggregate("before", "x0"), "outer")
    bad_seq = fake.put_bytes(a, broken, "outer-bad")
    fake.put_bytes(a, _aggregate("after", "y0", "y1"), "outer")
    spark = _as_spark(_reader(fake))
    batches, _ = _run(spark, spark.initialOffset())
    rows = _user_rows(batches)
    assert [r[0] for r in rows] == [b"x0", broken, b"y0", b"y1"]
    assert rows[1] == (broken, "outer-bad", bad_seq, a, None)


def test_a_replayed_batch_of_aggregates_has_the_same_rows_no_duplicate_no_loss() -> None:
    fake = FakeKinesis(shards=2, page_size=2)
    a, b = "shardId-000000000000", "shardId-000000000001"
    for n in range(4):
        fake.put_bytes(a, _aggregate(f"a{n}", *[f"a{n}-{i}" for i in range(3)]), f"pa{n}")
        fake.put_bytes(b, f"plain-{n}".encode(), f"pb{n}")
    fake.put_bytes(b, _aggregate("b", "b-0", "b-1"), "pb")
    # Batches bounded by Kinesis records: 3 aggregates of shard a, 3 records of b.
    reader = _reader(fake, **{"kinesis.maxFetchRecordsPerShard": "3"})
    spark = _as_spark(reader)
    start = spark.initialOffset()
    end = spark.latestOffset()
    first = _rows(spark.getCache(start, end))
    assert len([r for r in first if r[5] == a]) == 9  # 3 aggregates x 3 user records

    replica = pickle.loads(pickle.dumps(reader))
    replica._reader = ShardReader(fake, replica.options, sleep=lambda _s: None)
    assert _rows(replica.readBetweenOffsets(start, end)) == first

    restarted = _as_spark(replica)
    restarted.partitions(end, end)
    rest, _ = _run(restarted, end)
    everything = [(r[5], r[3], r[6]) for r in first] + [
        (r[5], r[3], r[6]) for rows in rest for r in rows
    ]
    assert len(everything) == len(set(everything)) == 4 * 3 + 4 + 2
    assert [r[0] for rows in rest for r in rows if r[5] == a] == [b"a3-0", b"a3-1", b"a3-2"]
