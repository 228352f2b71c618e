"""The python-kinesis source through real Spark against moto server.

Few tests, each covering several behaviours: a streaming query costs seconds.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from job.sources import read_stream
from local.emulators import Endpoints
from model.record import SOURCE_COLUMNS
from tests.job.source_helpers import job_config, new_stream, put, running
from tests.waits import poll


def test_every_record_once_in_bounded_batches_and_restart_reads_only_new(
    spark: Any, endpoints: Endpoints, tmp_path: Path
) -> None:
    client, stream, _ = new_stream(endpoints.aws_url, "src", shards=2)
    first = [f"a-{i}" for i in range(250)]
    put(client, stream, first)
    config = job_config(
        stream, endpoints.aws_url, str(tmp_path / "cp"), max_fetch_records_per_shard=50
    )
    frame = read_stream(spark, config)
    assert tuple(frame.columns) == SOURCE_COLUMNS

    with running(frame, config.checkpoint_location) as drain:
        got = drain()
    assert sorted(got.values()) == sorted(first)
    assert len(got.batches) >= 3  # 250 records over 2 shards, 50 per shard per batch
    for rows in got.batches.values():
        per_shard = Counter(row["shardId"] for row in rows)
        assert max(per_shard.values(), default=0) <= 50
    sample = got.rows[0]
    assert sample["streamName"] == stream
    assert sample["partitionKey"] == bytes(sample["data"]).decode()
    assert sample["approximateArrivalTimestamp"] is not None

    second = [f"b-{i}" for i in range(40)]
    put(client, stream, second)
    with running(read_stream(spark, config), config.checkpoint_location) as drain:
        again = drain()
    assert sorted(again.values()) == sorted(second)


def test_latest_reads_only_records_put_after_the_first_start(
    spark: Any, endpoints: Endpoints, tmp_path: Path
) -> None:
    client, stream, _ = new_stream(endpoints.aws_url, "src", shards=1)
    put(client, stream, [f"old-{i}" for i in range(10)])
    config = job_config(stream, endpoints.aws_url, str(tmp_path / "cp"), starting_position="LATEST")
    with running(read_stream(spark, config), config.checkpoint_location) as drain:
        assert drain().values() == []  # the start position is pinned here
        put(client, stream, [f"new-{i}" for i in range(10)])
        assert sorted(drain().values()) == sorted(f"new-{i}" for i in range(10))


def test_split_mid_stream_reads_parent_to_its_end_before_children(
    spark: Any, endpoints: Endpoints, tmp_path: Path
) -> None:
    """The endpoints' moto runs local.moto_server: Kinesis split semantics
    (stock moto moves a parent's records into its children)."""
    client, stream, [parent] = new_stream(endpoints.aws_url, "split", shards=1)
    before = [f"a-{i}" for i in range(30)]
    late = [f"late-{i}" for i in range(15)]
    after = [f"c-{i}" for i in range(40)]
    put(client, stream, before)
    config = job_config(
        stream,
        endpoints.aws_url,
        str(tmp_path / "cp"),
        max_fetch_records_per_shard=10,
        describe_shard_interval_sec=1,
    )
    with running(read_stream(spark, config), config.checkpoint_location) as drain:
        assert sorted(drain().values()) == sorted(before)
        put(client, stream, late)  # still in the parent, unread when it closes
        client.split_shard(StreamName=stream, ShardToSplit=parent, NewStartingHashKey=str(2**127))
        put(client, stream, after)
        # Shards are re-listed every describeShardInterval (1 s here): poll.
        expected = len(before + late + after)
        poll(
            lambda: len(drain().values()) >= expected,
            f"{expected} records read through the split",
            timeout=60,
            interval=0.2,
        )
        got = drain()

    values = got.values()
    assert sorted(values) == sorted(before + late + after)  # each exactly once
    batch_of = {
        bytes(row["data"]).decode(): (batch_id, row["shardId"])
        for batch_id, rows in got.batches.items()
        for row in rows
    }
    parent_batches = [b for b, shard in batch_of.values() if shard == parent]
    child_batches = [b for b, shard in batch_of.values() if shard != parent]
    assert {shard for _, shard in batch_of.values()} - {parent}  # children were read
    assert max(parent_batches) < min(child_batches)
