"""Helpers for the Kinesis source tests: a moto client, producers, a collector."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config

from app.config import JobConfig


def kinesis_client(endpoint: str) -> Any:
    config = Config(connect_timeout=5, read_timeout=10, retries={"total_max_attempts": 2})
    return boto3.client("kinesis", endpoint_url=endpoint, region_name="us-east-1", config=config)


def create_stream(client: Any, name: str, shards: int) -> list[str]:
    client.create_stream(StreamName=name, ShardCount=shards)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        summary = client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
        if summary["StreamStatus"] == "ACTIVE":
            return [s["ShardId"] for s in client.list_shards(StreamName=name)["Shards"]]
        time.sleep(0.05)
    raise TimeoutError(f"stream {name} not ACTIVE")


def put(client: Any, name: str, values: list[str]) -> None:
    """PutRecords in chunks of 500; partition keys spread records over shards."""
    for begin in range(0, len(values), 500):
        chunk = values[begin : begin + 500]
        response = client.put_records(
            StreamName=name,
            Records=[{"Data": value.encode(), "PartitionKey": value} for value in chunk],
        )
        if response.get("FailedRecordCount"):
            raise RuntimeError(f"put_records failed: {response}")


def job_config(stream: str, endpoint: str, checkpoint: str, **source: Any) -> JobConfig:
    return JobConfig.from_dict(
        {
            "instance_id": "test-us-east-1",
            "region": "us-east-1",
            "stream_name": stream,
            "database": "test_db",
            "checkpoint_location": checkpoint,
            "kinesis_endpoint_url": endpoint,
            "kafka": {"topic": "failures", "bootstrap_servers": "127.0.0.1:9"},
            "source": source,
        }
    )


@dataclass
class Collected:
    """Rows per batch id, as foreachBatch saw them."""

    batches: dict[int, list[Any]] = field(default_factory=dict)

    def sink(self, frame: Any, batch_id: int) -> None:
        self.batches[batch_id] = frame.collect()

    @property
    def rows(self) -> list[Any]:
        return [row for batch_id in sorted(self.batches) for row in self.batches[batch_id]]

    def values(self) -> list[str]:
        return [bytes(row["data"]).decode() for row in self.rows]


@contextmanager
def running(frame: Any, checkpoint: str) -> Iterator[Callable[[], Collected]]:
    """Start a foreachBatch query; yields a function that drains and returns."""
    collected = Collected()
    query = (
        frame.writeStream.foreachBatch(collected.sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )

    def drain() -> Collected:
        query.processAllAvailable()
        return collected

    try:
        yield drain
    finally:
        query.stop()
