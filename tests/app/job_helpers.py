"""Helpers shared by the job's tests: raw source rows, configs, plan shuffles."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from app.config import JobConfig
from app.sinks.kafka import KafkaSettings
from app.sources.schema import SOURCE_SCHEMA

ARRIVAL = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def event(
    event_id: str, occurred_at: str = "2026-01-02T03:04:05.123456789Z", **extra: Any
) -> bytes:
    body = {"id": event_id, "type": "created", "occurredAt": occurred_at, "payload": {"n": 1}}
    body.update(extra)
    return json.dumps(body, separators=(",", ":")).encode()


def raw_rows(
    records: list[bytes], *, shard: str = "shardId-000000000000", first_seq: int = 1
) -> list[tuple[Any, ...]]:
    return [
        (data, "stream-a", f"pk-{i}", str(first_seq + i), ARRIVAL.replace(tzinfo=None), shard)
        for i, data in enumerate(records)
    ]


def raw_frame(spark: Any, records: list[bytes], **kw: Any) -> Any:
    return spark.createDataFrame(raw_rows(records, **kw), SOURCE_SCHEMA)


def job_config(
    *,
    database: str,
    bootstrap: str,
    checkpoint: str = "/tmp/unused-checkpoint",
    **overrides: Any,
) -> JobConfig:
    raw: dict[str, Any] = {
        "instance_id": "test-us-east-1",
        "region": "us-east-1",
        "stream_name": "stream-a",
        "database": database,
        "checkpoint_location": checkpoint,
        "kafka": {
            "topic": f"failures.{database}",
            "bootstrap_servers": bootstrap,
            "delivery_timeout_ms": 5_000,
            "request_timeout_ms": 3_000,
            "flush_timeout_sec": 10,
        },
        "max_record_bytes": 2_048,
    }
    raw.update(overrides)
    return JobConfig.from_dict(raw)


def kafka_settings(config: JobConfig) -> KafkaSettings:
    assert config.kafka.bootstrap_servers is not None
    return KafkaSettings.from_options(
        config.kafka,
        region=config.region,
        instance_id=config.instance_id,
        bootstrap_servers=config.kafka.bootstrap_servers,
    )


_EXCHANGE = re.compile(r"^[\s:+\-|]*(\w*Exchange)\b", re.M)


def exchanges_in_plan(description: str) -> list[str]:
    """Exchange operators in a plan's tree (the final plan when AQE ran)."""
    tree = description.split("\n\n", 1)[0]
    if "== Final Plan ==" in tree:
        tree = tree.split("== Final Plan ==", 1)[1].split("== Initial Plan ==", 1)[0]
    return _EXCHANGE.findall(tree)


def execution_count(spark: Any) -> int:
    return int(spark._jsparkSession.sharedState().statusStore().executionsList().size())


def exchanges_since(spark: Any, start: int) -> list[str]:
    """Every Exchange in the SQL executions that ran after ``start`` executions."""
    executions = spark._jsparkSession.sharedState().statusStore().executionsList()
    found: list[str] = []
    for index in range(start, executions.size()):
        found += exchanges_in_plan(str(executions.apply(index).physicalPlanDescription()))
    return found
