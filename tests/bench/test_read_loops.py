"""bench/read_loops.py: the bare loops the latency benchmarks put the job
beside note when each record's id is first held, skip what has no id, and
report the error that stopped them instead of losing it in a thread."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from bench.read_loops import EfoLoop, Loop, Seen, poll_loops, raise_failed, seen_by, wait_ready
from model.polling import poll_until

REGION = "us-east-1"


def _record(key: object) -> dict[str, Any]:
    return {"Data": json.dumps({"id": key}).encode()}


def test_seen_keeps_each_id_s_first_time_and_skips_records_without_one() -> None:
    seen = Seen()
    seen.note([_record("a"), {"Data": b"not json"}, _record(7), {"Data": b"{}"}], now=1.0)
    seen.note([_record("a"), _record("b")], now=2.0)
    seen.first("c", 3.0)
    seen.first("c", 4.0)
    assert seen.snapshot() == {"a": 1.0, "b": 2.0, "c": 3.0}


def test_loops_merge_what_they_saw_and_a_failed_loop_is_raised_with_its_cause() -> None:
    one, two = Loop("one"), Loop("two")
    one.seen.first("a", 1.0)
    two.seen.first("b", 2.0)
    assert seen_by([one, two]) == {"a": 1.0, "b": 2.0}
    raise_failed([one, two])  # neither failed

    two.error = ConnectionError("gone")
    with pytest.raises(RuntimeError, match="read loop two stopped") as failed:
        raise_failed([one, two])
    assert isinstance(failed.value.__cause__, ConnectionError)
    with pytest.raises(RuntimeError, match="read loop two stopped"):
        wait_ready([one, two], timeout=5)


@dataclass
class _Batch:
    records: list[dict[str, Any]]
    state: int


@dataclass
class _Reader:
    """next_batch as EfoShardReader's: the records after ``state``, then
    empty (caught-up) batches; raises once told to."""

    records: list[dict[str, Any]]
    per_batch: int = 2
    fail: BaseException | None = None
    asked: list[int] = field(default_factory=list)

    def next_batch(self, shard: object, state: int) -> _Batch:
        self.asked.append(state)
        if self.fail is not None:
            raise self.fail
        chunk = self.records[state : state + self.per_batch]
        return _Batch(chunk, state + len(chunk))


@dataclass(frozen=True)
class _Shard:
    shard_id: str = "shardId-000000000000"


def test_an_efo_loop_reads_batch_after_batch_from_where_the_last_ended() -> None:
    reader = _Reader([_record(f"id-{i}") for i in range(5)])
    loop = EfoLoop(reader, _Shard(), 0)
    loop.start()
    try:
        poll_until(
            lambda: len(loop.seen.snapshot()) == 5 and loop.batches > 3,
            timeout=10,
            interval=0.01,
            on_timeout=lambda: AssertionError(f"saw {loop.seen.snapshot()}"),
        )
    finally:
        loop.stop.set()
        loop.join(5)
    assert loop.ready.is_set() and loop.error is None
    assert reader.asked[:4] == [0, 2, 4, 5] and loop.state == 5


def test_an_efo_loop_keeps_the_error_that_stopped_it() -> None:
    loop = EfoLoop(_Reader([], fail=TimeoutError("no subscription")), _Shard(), 0)
    loop.start()
    loop.join(5)
    assert not loop.is_alive() and isinstance(loop.error, TimeoutError)
    with pytest.raises(RuntimeError, match=f"read loop {loop.name} stopped"):
        raise_failed([loop])


def test_the_poll_loop_sees_what_is_put_after_it_started_only() -> None:
    with mock_aws():
        client = boto3.client("kinesis", region_name=REGION)
        client.create_stream(StreamName="loops", ShardCount=2)
        client.put_record(StreamName="loops", Data=json.dumps({"id": "before"}), PartitionKey="k")
        with poll_loops(client, "loops") as loops:
            for i in range(6):
                client.put_record(
                    StreamName="loops", Data=json.dumps({"id": f"after-{i}"}), PartitionKey=f"k{i}"
                )
            poll_until(
                lambda: len(seen_by(loops)) >= 6,
                timeout=30,
                interval=0.05,
                on_timeout=lambda: AssertionError(f"saw {seen_by(loops)}"),
            )
            seen = seen_by(loops)
        raise_failed(loops)
    assert sorted(seen) == [f"after-{i}" for i in range(6)]
