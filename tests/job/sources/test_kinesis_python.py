"""The Kinesis source's logic without Spark: options, retries, offsets, resharding.

The reader is driven the way Spark 4.1 drives a DataSourceStreamReader
(``Driver``: latestOffset, partitions, each partition read by a pickled copy
as on an executor, commit) against FakeKinesis, which behaves like the real
service where moto does not (see source_helpers.FakeKinesis), with the
recorded ends in a MemoryEndStore (and the real stores tested on their own).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator  # type: ignore[import-untyped]

from job.sources import describe_source, python_reader_options
from job.sources.aws_kinesis import connector_options
from job.sources.kinesis_fetch import ShardReader
from job.sources.kinesis_options import METADATA_PATH, parse_options
from job.sources.kinesis_python import KinesisStreamReader
from model.config import MIN_FETCH_TIME_SEC, ConfigError, JobConfig
from model.kinesis_offsets import (
    ShardInfo,
    ShardState,
)
from model.kinesis_plan import BatchOffset, resolve
from model.kpl import MAGIC
from model.record import SOURCE_COLUMNS
from tests.job.source_helpers import (
    DriverSide,
    FakeKinesis,
    MemoryEndStore,
    client_error,
    job_config,
)

# ---------------------------------------------------------------- options


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
    options = parse_options({**connector_options(config), METADATA_PATH: "/tmp/cp/_ends/"})
    assert options.metadata_path == "/tmp/cp/_ends/"
    assert (options.stream_name, options.region, options.endpoint_url) == (
        "orders",
        "us-east-1",
        "http://e",
    )
    assert options.starting_position.kind == "LATEST"
    assert options.describe_shard_interval_ms == 30_000
    assert options.max_fetch_records_per_shard == 7
    assert options.fail_on_data_loss is True


# ---------------------------------------------------------------- offsets


class Driver:
    """The reader as Spark 4.1 drives a DataSourceStreamReader
    (pyspark.sql.streaming.python_streaming_source_runner): latestOffset,
    partitions(start, end), each partition read by an executor (a pickled
    copy of the reader, with its own client), commit(end)."""

    def __init__(self, fake: FakeKinesis, store: MemoryEndStore | None = None, **options: str):
        self.fake = fake
        self.store = store if store is not None else MemoryEndStore()
        self.raw = options
        self.options = _options(**options)
        self.reader = self._wired(KinesisStreamReader(self.options), DriverSide(fake))

    def _wired(self, reader: KinesisStreamReader, client: Any) -> KinesisStreamReader:
        reader._reader = ShardReader(client, reader.options, sleep=lambda _s: None)
        reader._store = self.store
        return reader

    def executor(self) -> KinesisStreamReader:
        replica = pickle.loads(pickle.dumps(self.reader))
        assert replica._reader is None and replica._store is None  # options only
        return self._wired(replica, self.fake)

    def restarted(self) -> Driver:
        """A new driver process on the same stream and checkpoint."""
        return Driver(self.fake, self.store, **self.raw)

    def read(self, start: dict[str, Any], end: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Batch (start, end]: its partitions, each read in an executor."""
        rows = []
        for partition in self.reader.partitions(start, end):
            rows.extend(_rows(self.executor().read(partition)))
        return rows

    def run(self, start: dict[str, Any]) -> tuple[list[list[tuple[Any, ...]]], dict[str, Any]]:
        """Batches until no new offset appears."""
        batches: list[list[tuple[Any, ...]]] = []
        for _ in range(100):
            end = self.reader.latestOffset()
            if end == start:
                return batches, start
            batches.append(self.read(start, end))
            self.reader.commit(end)
            start = end
        raise AssertionError("the source never caught up")


def _options(**override: str) -> Any:
    raw = {
        "kinesis.streamName": "s",
        "kinesis.region": "us-east-1",
        "kinesis.metadataPath": "/unused: tests inject a MemoryEndStore",
        "kinesis.describeShardInterval": "0ms",
        "kinesis.getRecords.fetchIntervalMs": "0",
        "kinesis.clientRetryIntervalsMs": "1",
        **override,
    }
    return parse_options(raw)


def _rows(batches: Iterable[Any]) -> list[tuple[Any, ...]]:
    """Arrow batches as Spark receives them, as tuples of SOURCE_COLUMNS."""
    found = []
    for batch in batches:
        assert batch.schema.names == list(SOURCE_COLUMNS)
        found.extend(tuple(row[name] for name in SOURCE_COLUMNS) for row in batch.to_pylist())
    return found


def _keys(batches: list[list[tuple[Any, ...]]]) -> list[str]:
    return [row[2] for rows in batches for row in rows]


def _span(batches: list[list[tuple[Any, ...]]], shard: str) -> tuple[int, int]:
    """First and last batch holding a record of ``shard``."""
    found = [n for n, rows in enumerate(batches) if any(row[5] == shard for row in rows)]
    assert found, f"no batch read {shard}"
    return min(found), max(found)


A_SHARD, B_SHARD = "shardId-000000000000", "shardId-000000000001"


def _twelve_and_three_read_five_at_a_time() -> tuple[FakeKinesis, Driver]:
    """Two shards holding a0..a11 and b0..b2 (pages of 4), read at most 5 per
    shard per batch: the reader over them."""
    fake = FakeKinesis(shards=2, page_size=4)
    fake.put(A_SHARD, *[f"a{i}" for i in range(12)])
    fake.put(B_SHARD, *[f"b{i}" for i in range(3)])
    return fake, Driver(fake, **{"kinesis.maxFetchRecordsPerShard": "5"})


def test_each_record_is_fetched_once_in_bounded_batches() -> None:
    fake, driver = _twelve_and_three_read_five_at_a_time()
    a = A_SHARD
    batches, _ = driver.run(driver.reader.initialOffset())
    assert sorted(_keys(batches)) == sorted(
        [f"a{i}" for i in range(12)] + [f"b{i}" for i in range(3)]
    )
    assert set(fake.served.values()) == {1}  # the tasks' GetRecords returned each record once
    assert set(fake.probed) <= {"a0", "b0"}  # the driver's probes: one record, at the start
    assert [len([r for r in rows if r[5] == a]) for rows in batches] == [5, 5, 2]
    put = fake.shards[a]["records"][0]
    [row] = [row for rows in batches for row in rows if row[2] == "a0"]
    assert row == (
        b"a0", "s", "a0", put["SequenceNumber"], put["ApproximateArrivalTimestamp"], a, None
    )  # fmt: skip


def test_one_task_per_shard_or_shards_grouped_into_the_read_tasks() -> None:
    fake = FakeKinesis(shards=5)
    for shard in fake.shards:
        fake.put(shard, f"{shard}-x")
    start = Driver(fake).reader.initialOffset()
    for tasks, sizes in ((None, [1] * 5), ("2", [3, 2]), ("8", [1] * 5)):
        options = {} if tasks is None else {"kinesis.python.readTasks": tasks}
        driver = Driver(fake, **options)
        end = driver.reader.latestOffset()
        parts = driver.reader.partitions(start, end)
        assert [len(p.reads) for p in parts] == sizes
        assert sorted(r.shard.shard_id for p in parts for r in p.reads) == sorted(fake.shards)
        assert sorted(row[2] for row in driver.read(start, end)) == sorted(
            f"{shard}-x" for shard in fake.shards
        )


def test_an_idle_trigger_probes_once_per_shard_and_plans_no_batch() -> None:
    fake = FakeKinesis(shards=2)
    fake.put(A_SHARD, "x", "y")
    driver = Driver(fake)
    batches, end = driver.run(driver.reader.initialOffset())
    assert _keys(batches) == ["x", "y"]
    fake.calls.clear()
    for _ in range(3):
        assert driver.reader.latestOffset() == end  # the same offset: Spark runs no batch
    # One GetRecords per shard per idle trigger, from the iterator the last
    # empty probe returned (the run's own last trigger): no GetShardIterator.
    assert fake.calls["get_records"] == 3 * 2
    assert fake.calls["get_shard_iterator"] == 0
    fake.put(B_SHARD, "z")
    more, _ = driver.run(end)
    assert _keys(more) == ["z"]


def test_a_read_stopped_by_its_bound_plans_the_next_batch_without_a_probe() -> None:
    fake = FakeKinesis(shards=1)
    fake.put(A_SHARD, *[f"r{i}" for i in range(6)])
    driver = Driver(fake, **{"kinesis.maxFetchRecordsPerShard": "4"})
    start = driver.reader.initialOffset()
    first = driver.reader.latestOffset()
    assert [row[2] for row in driver.read(start, first)] == [f"r{i}" for i in range(4)]
    probes = fake.calls["get_records"] - 1  # the task's one call
    second = driver.reader.latestOffset()
    assert fake.calls["get_records"] - 1 == probes  # not caught up: no probe needed
    assert BatchOffset.from_json(second).batch == 1
    assert [row[2] for row in driver.read(first, second)] == ["r4", "r5"]


def test_an_open_shard_caught_up_ends_its_batch_without_another_call() -> None:
    fake = FakeKinesis(shards=1)
    fake.put("shardId-000000000000", "x", "y")
    driver = Driver(fake)
    start = driver.reader.initialOffset()
    end = driver.reader.latestOffset()
    before = fake.calls["get_records"]
    assert [row[2] for row in driver.read(start, end)] == ["x", "y"]
    assert fake.calls["get_records"] - before == 1  # MillisBehindLatest 0 on the page with x, y


def test_split_and_merge_read_every_record_once_parents_before_children() -> None:
    fake, driver = _twelve_and_three_read_five_at_a_time()
    a, b = A_SHARD, B_SHARD
    batches, start = driver.run(driver.reader.initialOffset())

    fake.put(a, *[f"a-late{i}" for i in range(7)])  # unread when the shard splits
    left, right = fake.split(a)
    fake.put(left, *[f"l{i}" for i in range(6)])
    fake.put(right, *[f"r{i}" for i in range(2)])
    merged = fake.merge(left, b)
    fake.put(merged, *[f"m{i}" for i in range(4)])
    more, start = driver.run(start)
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
    assert _resolved(driver, start)[a].done


def _resolved(driver: Driver, offset: dict[str, Any]) -> dict[str, ShardState]:
    """Where the batch after ``offset`` starts, per shard."""
    return resolve(BatchOffset.from_json(offset), driver.store.get).positions


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
    driver = Driver(fake, **{"kinesis.maxFetchRecordsPerShard": "4"})
    batches, end = driver.run(driver.reader.initialOffset())

    assert sorted(_keys(batches)) == sorted(
        ["f0", "f1"] + [f"s{i}" for i in range(11)] + [f"c{i}" for i in range(6)]
    )
    assert set(fake.served.values()) == {1}
    assert _span(batches, fast) == (0, 0)
    assert _span(batches, slow) == (0, 2)
    # The fast parent finished in batch 0; the child still waits for the slow one.
    assert _span(batches, child)[0] == _span(batches, slow)[1] + 1
    assert [row[2] for row in batches[-1]] == ["c4", "c5"]  # 4 per batch in the child too
    offsets = _resolved(driver, end)
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
    driver = Driver(fake)
    batches, end = driver.run(driver.reader.initialOffset())
    assert _keys(batches) == [f"p{i}" for i in range(5)] + ["l0"]
    assert _span(batches, parent) == (0, 0)
    assert _span(batches, left) == (1, 1)
    assert _resolved(driver, end)[parent].done


def test_replay_after_a_restart_reads_the_recorded_range_and_resumes() -> None:
    fake = FakeKinesis(shards=2, page_size=3)
    a, b = "shardId-000000000000", "shardId-000000000001"
    fake.put(a, *[f"x{i}" for i in range(8)])
    fake.put(b, "b0", "b1")
    driver = Driver(fake, **{"kinesis.maxFetchRecordsPerShard": "5"})
    start = driver.reader.initialOffset()
    end = driver.reader.latestOffset()
    first = driver.read(start, end)
    assert [row[2] for row in first] == [f"x{i}" for i in range(5)] + ["b0", "b1"]
    fake.put(a, *[f"y{i}" for i in range(4)])  # arrives before the replay
    fake.put(b, "b2")

    # The query dies before the commit; on restart Spark replays (start, end]
    # from its offset log: the tasks find the recorded ends and read exactly
    # those ranges, not the records that arrived since.
    restarted = driver.restarted()
    assert restarted.read(start, end) == first
    assert restarted.store.writes[(0, a)] == 1  # recorded once, by the first run
    batches, _ = restarted.run(end)
    assert sorted(_keys(batches)) == sorted(
        [f"x{i}" for i in range(5, 8)] + ["b2"] + [f"y{i}" for i in range(4)]
    )


def test_a_committed_batch_resumes_after_its_recorded_ends() -> None:
    """Spark restarts a query whose last batch committed by calling
    partitions(last, last) (empty) and then latestOffset: the driver learns
    the last offset from that call."""
    fake = FakeKinesis(shards=1)
    fake.put(A_SHARD, "x0", "x1")
    driver = Driver(fake)
    _, end = driver.run(driver.reader.initialOffset())
    fake.put(A_SHARD, "x2")
    restarted = driver.restarted()
    assert restarted.reader.partitions(end, end) == []
    batches, _ = restarted.run(end)
    assert _keys(batches) == ["x2"]


def test_a_retried_task_reads_what_the_first_attempt_recorded() -> None:
    fake = FakeKinesis(shards=1)
    fake.put(A_SHARD, "x0", "x1")
    driver = Driver(fake)
    start = driver.reader.initialOffset()
    end = driver.reader.latestOffset()
    [partition] = driver.reader.partitions(start, end)
    first = _rows(driver.executor().read(partition))  # rows lost: the task died after
    fake.put(A_SHARD, "x2")
    assert _rows(driver.executor().read(partition)) == first  # not x2
    assert [row[2] for row in first] == ["x0", "x1"]


def test_the_loser_of_two_racing_attempts_reads_the_winners_range() -> None:
    """Two attempts of one task (a retry racing a speculative copy): the slow
    one read x0 only; meanwhile the other read x0, x1 and recorded first. The
    slow one hands Spark the recorded range, not what it read."""
    fake = FakeKinesis(shards=1)
    fake.put(A_SHARD, "x0")
    driver = Driver(fake)
    start = driver.reader.initialOffset()
    end = driver.reader.latestOffset()
    [partition] = driver.reader.partitions(start, end)
    slow = driver.executor()
    real_next = slow.shard_reader.next_batch
    winner: list[tuple[Any, ...]] = []

    def read_then_lose(shard: ShardInfo, begin: ShardState) -> Any:
        got = real_next(shard, begin)
        fake.put(A_SHARD, "x1")
        winner.extend(_rows(driver.executor().read(partition)))
        return got

    slow.shard_reader.next_batch = read_then_lose  # type: ignore[method-assign]
    loser = _rows(slow.read(partition))
    assert [row[2] for row in winner] == ["x0", "x1"]
    assert loser == winner
    assert driver.store.writes[(0, A_SHARD)] == 2


def test_a_batch_that_never_recorded_reads_afresh() -> None:
    fake = FakeKinesis(shards=1)
    fake.put(A_SHARD, "x0")
    driver = Driver(fake)
    start = driver.reader.initialOffset()
    end = driver.reader.latestOffset()
    fake.failures = [client_error("AccessDeniedException")]  # the task fails before recording
    with pytest.raises(Exception, match="AccessDenied"):
        driver.read(start, end)
    assert driver.store.ends == {}
    fake.put(A_SHARD, "x1")
    assert [row[2] for row in driver.restarted().read(start, end)] == ["x0", "x1"]


def test_the_previous_readers_checkpoint_resumes_and_its_batch_replays_exactly() -> None:
    """Offsets of the driver-side SimpleDataSourceStreamReader ({"shards": ...}
    after its batch): an uncommitted batch between two of them is replayed as
    its exact ranges, and the next batch starts after them."""
    fake = FakeKinesis(shards=2)
    fake.put(A_SHARD, "a0", "a1", "a2")
    fake.put(B_SHARD, "b0")
    recs = fake.shards[A_SHARD]["records"]
    old_start = {"shards": {A_SHARD: ShardState(after=recs[0]["SequenceNumber"]).to_json(),
                            B_SHARD: ShardState().to_json()}}  # fmt: skip
    old_end = {"shards": {A_SHARD: ShardState(after=recs[1]["SequenceNumber"]).to_json(),
                          B_SHARD: ShardState().to_json()}}  # fmt: skip
    driver = Driver(fake)
    assert [row[2] for row in driver.read(old_start, old_end)] == ["a1"]
    batches, end = driver.run(old_end)
    assert sorted(_keys(batches)) == ["a2", "b0"]
    assert BatchOffset.from_json(end).batch == 0


def test_latest_starts_after_existing_records_and_is_pinned_for_replays() -> None:
    fake = FakeKinesis(shards=1)
    shard = "shardId-000000000000"
    fake.put(shard, "old1", "old2")
    driver = Driver(fake, **{"kinesis.startingPosition": "LATEST"})
    start = driver.reader.initialOffset()
    assert driver.reader.initialOffset() == start  # the same pin when asked twice
    assert driver.reader.latestOffset() == start  # nothing after the pin: no batch
    fake.put(shard, "new1", "new2")
    batches, _ = driver.run(start)
    assert _keys(batches) == ["new1", "new2"]


def test_vanished_shard_fails_the_query_only_with_fail_on_data_loss() -> None:
    fake = FakeKinesis(shards=2)
    fake.put(A_SHARD, "x")
    strict = Driver(fake, **{"kinesis.failOnDataLoss": "true"}).reader
    lenient = Driver(fake, **{"kinesis.failOnDataLoss": "false"}).reader
    strict.initialOffset()
    lenient.initialOffset()
    del fake.shards["shardId-000000000001"]
    with pytest.raises(RuntimeError, match="shardId-000000000001"):
        strict.latestOffset()
    end = BatchOffset.from_json(lenient.latestOffset())
    assert end.shards["shardId-000000000001"].done
    assert [info.shard_id for info in end.reads] == [A_SHARD]


# ---------------------------------------------------------------- KPL aggregation


def _aggregate(key: str, *values: str) -> bytes:
    """An aggregate made by awslabs' aggregator; user record ``v`` has key ``k-v``."""

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
    driver = Driver(fake)
    batches, _ = driver.run(driver.reader.initialOffset())
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
    driver = Driver(fake)
    batches, _ = driver.run(driver.reader.initialOffset())
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
    driver = Driver(fake)
    batches, _ = driver.run(driver.reader.initialOffset())
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
    driver = Driver(fake, **{"kinesis.maxFetchRecordsPerShard": "3"})
    start = driver.reader.initialOffset()
    end = driver.reader.latestOffset()
    first = driver.read(start, end)
    assert len([r for r in first if r[5] == a]) == 9  # 3 aggregates x 3 user records

    restarted = driver.restarted()
    assert restarted.read(start, end) == first
    rest, _ = restarted.run(end)
    everything = [(r[5], r[3], r[6]) for r in first] + [
        (r[5], r[3], r[6]) for rows in rest for r in rows
    ]
    assert len(everything) == len(set(everything)) == 4 * 3 + 4 + 2
    assert [r[0] for rows in rest for r in rows if r[5] == a] == [b"a3-0", b"a3-1", b"a3-2"]


def test_the_job_gives_python_kinesis_its_ends_folder_and_read_tasks() -> None:
    config = job_config("orders", "http://e", "s3://bucket/cp/orders")
    spark = SimpleNamespace(sparkContext=SimpleNamespace(defaultParallelism=20))
    options = python_reader_options(spark, config)  # type: ignore[arg-type]
    assert options == {
        "kinesis.metadataPath": "s3://bucket/cp/orders/_kinesis_ends/",
        "kinesis.python.readTasks": "20",
    }
    parsed = parse_options({**connector_options(config), **options})
    assert (parsed.metadata_path, parsed.read_tasks) == ("s3://bucket/cp/orders/_kinesis_ends/", 20)
    assert describe_source(config).endswith("; executors read the shards")
