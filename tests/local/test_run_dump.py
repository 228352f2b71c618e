"""local/run_dump.py: a run's records read back from Kinesis (in-process
moto); its checkpoint readers are tested with the report they feed
(tests/local/test_report.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
from moto import mock_aws

from local.run_dump import read_arrivals


def test_read_arrivals_returns_each_shards_records_in_order() -> None:
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name="us-east-1")
        kinesis.create_stream(StreamName="s", ShardCount=2)
        placed = kinesis.put_records(
            StreamName="s",
            Records=[{"Data": b"x", "PartitionKey": f"k{i}"} for i in range(7)],
        )["Records"]
        arrivals = read_arrivals(kinesis, "s")
    expected: dict[str, list[str]] = {}
    for record in placed:
        expected.setdefault(record["ShardId"], []).append(record["SequenceNumber"])
    assert {
        shard: [seq for seq, _ in records] for shard, records in arrivals.items() if records
    } == expected
    assert sum(len(r) for r in arrivals.values()) == 7
    now_ms = datetime.now(UTC).timestamp() * 1000
    assert all(now_ms - 60_000 < t <= now_ms for r in arrivals.values() for _, t in r)
