"""What a local run leaves behind (its job.json, checkpoint files) and a moto
stream to read lag from: the helpers of the status, stop, produce and
migrate_checkpoint tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3

from infra.job_config import job_config_for
from local.harness import load_example_instances, replace_fields
from local.job_process import write_config
from local.table import sql_catalog
from model import contract
from model.config import JobConfig
from tests.fixtures import EXAMPLE_CDK_JSON

INSTANCE = "orders-ap-northeast-2"
REGION = "ap-northeast-2"
STREAM = contract.stream_name("orders", REGION)
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SHARD0, SHARD1 = "shardId-000000000000", "shardId-000000000001"
HASH_KEY = {SHARD0: "0", SHARD1: str(2**127 + 1)}


# ------------------------------------------------------------------ helpers (shared)


def write_local_run(work_dir: Path, instance_id: str = INSTANCE, **overrides: Any) -> JobConfig:
    """A local run's job.json as local.harness writes it, with AWS endpoints
    left to in-process moto (none) and the SQLite catalog under the run."""

    instance = {i.instance_id: i for i in load_example_instances(EXAMPLE_CDK_JSON)}[instance_id]
    root = work_dir / instance_id
    config = job_config_for(
        instance,
        checkpoint_location=str(root / "checkpoint"),
        kafka_bootstrap_servers="127.0.0.1:9",
        kafka_security="PLAINTEXT",
        database_location=str(root / "warehouse" / f"{instance.database_name}.db"),
        stop_marker_path=str(root / "stop"),
        source_format="python-kinesis",
    )
    config = replace_fields(config, {"catalog": sql_catalog(root), **overrides})
    write_config(config, root / "job.json")
    return config


def write_batch(
    checkpoint: Path, batch: int, offset: dict[str, Any], *, committed: bool = True
) -> None:
    """Spark's offsets/N (version, batch metadata, the source's offset) and commits/N."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n' + json.dumps(offset),
        encoding="utf-8",
    )
    if committed:
        (checkpoint / "commits" / str(batch)).write_text(
            'v1\n{"nextBatchWatermarkMs":0}', encoding="utf-8"
        )


def shards_offset(**after: str | None) -> dict[str, Any]:
    """A python-kinesis offset: shard index -> last sequence handed to Spark."""
    return {
        "shards": {
            f"shardId-{int(k.removeprefix('s')):012d}": {"after": v, "ts": None, "done": False}
            for k, v in after.items()
        }
    }


def make_stream(shards: int = 2) -> Any:
    kinesis = boto3.client("kinesis", region_name=REGION)
    kinesis.create_stream(StreamName=STREAM, ShardCount=shards)
    return kinesis


def put(kinesis: Any, shard: str, n: int) -> list[str]:
    """``n`` records on ``shard``; their sequence numbers."""
    return [
        kinesis.put_record(
            StreamName=STREAM, Data=b"{}", PartitionKey="k", ExplicitHashKey=HASH_KEY[shard]
        )["SequenceNumber"]
        for _ in range(n)
    ]
