"""The python-kinesis source through real Spark against moto server.

Few tests, each covering several behaviours: a streaming query costs seconds.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from app.local.emulators import Endpoints
from app.sources import SOURCE_COLUMNS, read_stream
from tests.app.source_helpers import create_stream, job_config, kinesis_client, put, running


def test_every_record_once_in_bounded_batches_and_restart_reads_only_new(
    spark: Any, endpoints: Endpoints, tmp_path: Path
) -> None:
    client = kinesis_client(endpoints.aws_url)
    stream = f"src-{uuid.uuid4().hex[:8]}"
    create_stream(client, stream, shards=2)
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
