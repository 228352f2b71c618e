"""Lifecycle: graceful stop, a second copy, a restart after a pause, two
instances side by side, a shard split while running."""

from __future__ import annotations

import math
import socket
from pathlib import Path
from typing import Any

import pytest

from job.outcome import ExitCode
from local.emulators import Emulators
from local.harness import LocalInstance
from model.kinesis_ends import open_store
from model.kinesis_offsets import ShardState
from model.kinesis_plan import BatchOffset, resolve
from tests.e2e.conftest import MakeLocal, mix, poll

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def test_second_copy_refuses_then_a_stop_marker_ends_the_first_after_its_batch(
    emulators: Emulators, make_local: MakeLocal
) -> None:
    local = make_local(emulators)
    first = local.start_job()
    local.produce(mix(500, seed=51, prefix="sc-a"))
    local.wait_until_accounted(timeout=240)

    copy = local.start_second_copy()
    code = copy.wait(timeout=180)
    log = copy.log_path.read_text(encoding="utf-8", errors="replace")
    assert code == ExitCode.LEASE_HELD, log[-3000:]
    # The reason names the instance and the live holder: the first copy's process.
    assert (
        f"another copy of the job for instance {local.config.instance_id!r} is running on "
        "this checkpoint" in log
    ), log[-3000:]
    assert f"held by {socket.gethostname()}:{first.pid}); refusing to start" in log, log[-3000:]
    assert "lease acquired" not in log, "the copy never got as far as starting Spark"

    assert first.running, "the first copy must be unaffected"
    local.produce(mix(500, seed=52, prefix="sc-b"))
    local.wait_until_accounted(timeout=240)

    # The stop marker ends the job with exit 0 after the current batch.
    first.request_stop()
    assert first.wait(timeout=120) == 0, local.log_tail()
    assert local.config.stop_marker_path is not None
    assert not Path(local.config.stop_marker_path).exists(), "consumed: the next start runs"
    assert set(local.checkpoint_offsets()) == local.committed_batches(), (
        "every planned batch was committed before the exit"
    )
    assert local.summary().ok


def test_restart_after_a_pause_processes_the_backlog_in_bounded_batches(
    emulators: Emulators, make_local: MakeLocal
) -> None:
    limit = 1_000
    shards = 2
    local = make_local(
        emulators, shards=shards, overrides={"source": {"max_fetch_records_per_shard": limit}}
    )
    local.start_job()
    local.produce(mix(1_000, seed=61, prefix="rp-a"))
    local.wait_until_accounted(timeout=240)
    assert local.stop_job() == 0, local.log_tail()
    before = set(local.checkpoint_offsets())

    local.produce(mix(10_000, seed=62, prefix="rp-b"))
    local.start_job()
    local.wait_until_accounted(timeout=400)
    assert local.stop_job() == 0, local.log_tail()

    offsets = local.checkpoint_offsets()
    new_batches = sorted(set(offsets) - before)
    per_batch = [_records_per_shard(local, offsets[b]) for b in new_batches if _reads(offsets, b)]
    nonempty = [b for b in per_batch if sum(b.values())]
    assert sum(sum(b.values()) for b in per_batch) == 10_000
    assert all(n <= limit for b in per_batch for n in b.values()), per_batch
    assert math.ceil(10_000 / (shards * limit)) <= len(nonempty) <= 10_000 // limit + 2
    assert local.summary().ok


def _reads(offsets: dict[int, dict[str, Any]], batch: int) -> bool:
    """Spark batch ``batch`` reads ``(offsets[batch - 1], offsets[batch]]``. A
    no-data batch (Spark runs one when the de-duplication watermark moves with
    no new input) repeats the previous offset and reads nothing: the reader's
    ``partitions`` returns no task for ``start == end``. Counted from its
    offset alone, it would count the previous batch's records twice."""
    return offsets[batch] != offsets.get(batch - 1)


def _batch_ends(local: LocalInstance, offset: dict[str, Any]) -> dict[str, ShardState]:
    """Where a batch ended per shard: its offset holds where it started, the
    reading tasks recorded the ends beside the checkpoint (kinesis_plan)."""
    store = open_store(local.config.source_ends_uri)
    return resolve(BatchOffset.from_json(offset), store.get).positions


def _records_per_shard(local: LocalInstance, offset: dict[str, Any]) -> dict[str, int]:
    """Records a batch read per shard: moto numbers records 1, 2, 3... per shard."""
    start = BatchOffset.from_json(offset).shards

    def seq(state: ShardState | None) -> int:
        return int(state.after) if state and state.after is not None else 0

    ends = _batch_ends(local, offset)
    return {shard: seq(state) - seq(start.get(shard)) for shard, state in ends.items()}


def test_shard_split_while_running_loses_and_duplicates_nothing(
    emulators: Emulators, make_local: MakeLocal
) -> None:
    local = make_local(emulators, shards=2)
    local.start_job()
    local.produce(mix(2_000, seed=81, prefix="rs-a"))
    poll(lambda: local.batches() >= 1, "first batch committed", timeout=240)

    _split_first_shard(local)
    local.produce(mix(2_000, seed=82, prefix="rs-b"))
    local.wait_until_accounted(timeout=300)
    assert local.stop_job() == 0, local.log_tail()
    summary = local.summary()
    assert summary.ok, summary.problems
    assert summary.duplicate_ids == 0
    shards = local.kinesis.list_shards(StreamName=local.config.stream_name)["Shards"]
    assert len(shards) == 4, "parent + two children + the untouched shard"
    children = {p.shard_id for r in local.reports[1:] for p in r.placed}
    assert children - {"shardId-000000000000", "shardId-000000000001"}, (
        "records after the split must have gone to the children"
    )


def _split_first_shard(local: LocalInstance) -> None:
    client = local.kinesis
    stream = local.config.stream_name
    shard = client.list_shards(StreamName=stream)["Shards"][0]
    low = int(shard["HashKeyRange"]["StartingHashKey"])
    high = int(shard["HashKeyRange"]["EndingHashKey"])
    client.split_shard(
        StreamName=stream,
        ShardToSplit=shard["ShardId"],
        NewStartingHashKey=str((low + high) // 2),
    )
    poll(
        lambda: (
            client.describe_stream_summary(StreamName=stream)["StreamDescriptionSummary"][
                "StreamStatus"
            ]
            == "ACTIVE"
        ),
        "stream ACTIVE after the split",
        timeout=30,
        interval=0.2,
    )
