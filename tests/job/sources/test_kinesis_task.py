"""One ``python-kinesis`` task's read of its shards: a replay reads exactly its
range, a recorded end is read again exactly, and a fresh read records its end
before any row leaves; an attempt that lost the race reads the winner's range.
A fake GetRecords reader and the in-memory end store stand in for Kinesis and
the store."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from job.sources.kinesis_fetch import ShardBatch, ShardReader
from job.sources.kinesis_options import ReaderOptions
from job.sources.kinesis_task import batch_reader, read_shard, read_task, uses_fan_out
from model.kinesis_ends import ShardEnd
from model.kinesis_offsets import ShardInfo, ShardState
from model.kinesis_plan import ShardRead
from tests.job.source_helpers import MemoryEndStore, efo_record

SHARD = ShardInfo("shardId-000000000000")


class FakePolling:
    """GetRecords over sequence numbers 1..``last``: ``read_range`` serves
    ``(start, until]`` and ``next_batch`` the next ``page`` records."""

    def __init__(self, last: int, page: int = 3) -> None:
        self.last, self.page = last, page
        self.calls: list[tuple[str, str | None, str | None]] = []

    def _after(self, state: ShardState) -> int:
        return int(state.after or 0)

    def read_range(self, shard_id: str, start: ShardState, until: str) -> list[dict[str, Any]]:
        self.calls.append(("range", start.after, until))
        return [efo_record(n) for n in range(self._after(start) + 1, int(until) + 1)]

    def next_batch(self, shard: ShardInfo, start: ShardState) -> ShardBatch:
        self.calls.append(("fresh", start.after, None))
        end = min(self.last, self._after(start) + self.page)
        records = [efo_record(n) for n in range(self._after(start) + 1, end + 1)]
        return ShardBatch(records, ShardState(after=str(end)), caught_up=end == self.last)


def _sequences(records: list[dict[str, Any]]) -> list[int]:
    return [int(record["SequenceNumber"]) for record in records]


def _read(batch: int, read: ShardRead, store: MemoryEndStore, polling: FakePolling) -> list[int]:
    reader = cast(ShardReader, polling)
    return _sequences(read_shard(batch, read, store, reader, polling.next_batch))


def test_a_replay_reads_exactly_its_range_and_records_nothing() -> None:
    store, polling = MemoryEndStore(), FakePolling(last=10)
    read = ShardRead(SHARD, ShardState(after="2"), until="6")
    assert _read(7, read, store, polling) == [3, 4, 5, 6]
    assert store.ends == {} and polling.calls == [("range", "2", "6")]


def test_a_fresh_read_records_its_end_and_a_retry_reads_the_same_rows() -> None:
    store, polling = MemoryEndStore(), FakePolling(last=10)
    read = ShardRead(SHARD, ShardState(after="2"))
    assert _read(7, read, store, polling) == [3, 4, 5]
    assert store.ends[(7, SHARD.shard_id)] == ShardEnd(ShardState(after="5"), False, 3)
    polling.page = 5  # a retry would read further if it read fresh
    assert _read(7, read, store, polling) == [3, 4, 5]
    assert polling.calls[-1] == ("range", "2", "5")


class LateLook(MemoryEndStore):
    """The winner recorded between this attempt's look and its own write."""

    def get(self, batch: int, shard_id: str) -> ShardEnd | None:
        return None


def test_an_attempt_that_lost_the_race_reads_the_winners_range() -> None:
    store, polling = LateLook(), FakePolling(last=10, page=5)
    store.put_once(7, SHARD.shard_id, ShardEnd(ShardState(after="4"), False, 2))
    assert _read(7, ShardRead(SHARD, ShardState(after="2")), store, polling) == [3, 4]
    assert polling.calls == [("fresh", "2", None), ("range", "2", "4")]


def test_a_recorded_read_that_moved_nothing_reads_nothing() -> None:
    store, polling = MemoryEndStore(), FakePolling(last=2)
    store.put_once(7, SHARD.shard_id, ShardEnd(ShardState(after="2"), True, 0))
    assert _read(7, ShardRead(SHARD, ShardState(after="2")), store, polling) == []
    assert polling.calls == []


def _options(consumer_type: str) -> ReaderOptions:
    return cast(ReaderOptions, SimpleNamespace(consumer_type=consumer_type))


def test_polling_is_the_fresh_read_unless_fan_out_is_asked_for() -> None:
    polling = cast(ShardReader, FakePolling(last=1))
    assert not uses_fan_out(_options("GetRecords"))
    assert batch_reader(_options("GetRecords"), None, polling, None) == polling.next_batch
    assert uses_fan_out(_options("SubscribeToShard"))
    with pytest.raises(ValueError, match="no consumer ARN was resolved"):
        batch_reader(_options("SubscribeToShard"), None, polling, None)


def test_a_task_yields_one_arrow_batch_per_shard_that_had_records() -> None:
    other = ShardInfo("shardId-000000000001")
    reads = [ShardRead(SHARD, ShardState()), ShardRead(other, ShardState())]
    got = {SHARD.shard_id: [efo_record(1), efo_record(2)], other.shard_id: []}
    batches = list(
        read_task(
            "orders",
            reads,
            lambda read: got[read.shard.shard_id],
            lambda rows, items: [rows(item) for item in items],
        )
    )
    assert [batch.num_rows for batch in batches] == [2]
    assert batches[0].column("shardId").to_pylist() == [SHARD.shard_id] * 2
