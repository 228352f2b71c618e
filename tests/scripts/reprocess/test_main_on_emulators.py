"""``python -m scripts.reprocess`` in-process against tansu and moto server (no job, no JVM).

The failure records are produced by the job's own Kafka sink
(``job.sinks.kafka.deliver``: same key, value and headers), on a topic and a
stream named from an instance declared in a ``cdk.json`` of this test's own
(a domain nothing else on the shared emulators uses).
"""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from job.sinks.kafka import deliver
from job.sources import schema
from local.emulators import Endpoints
from local.failures import ensure_topic
from model import record
from model.kafka_settings import KafkaSettings
from model.record import ERROR_CLASS, MALFORMED_JSON, MESSAGE, NOT_UTF8, REASON
from producer.local_run import FAKE_CREDENTIALS
from producer.stream_writer import ensure_stream, kinesis_client
from scripts.reprocess import __main__ as reprocess
from scripts.reprocess.kafka import FailureTopicReader, Topic
from tests.fixtures import EXAMPLE_CDK_JSON

INSTANCE = "rptest-us-east-1"
STREAM = "streaming-rptest-us-east-1"
TOPIC = "streaming.rptest.us-east-1.failures"
PARTITIONS = 3


@pytest.fixture
def cdk_json(tmp_path: Path) -> Path:
    real = json.loads(EXAMPLE_CDK_JSON.read_text(encoding="utf-8"))
    real["context"]["streaming"]["instances"] = [{"domain": "rptest", "region": "us-east-1"}]
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(real), encoding="utf-8")
    return path


def failure_rows(count: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        reason = MALFORMED_JSON if i % 2 == 0 else NOT_UTF8
        rows.append(
            {
                schema.DATA: f'{{"id":"bad-{i:02d}"'.encode(),
                record.STREAM.column: STREAM,
                record.SHARD.column: "shardId-000000000000",
                record.SEQUENCE.column: str(1000 + i),
                record.PARTITION_KEY.column: f"bad-{i:02d}",
                record.ARRIVAL.column: datetime(2026, 11, 21, 12, 0, i, tzinfo=UTC),
                REASON: reason,
                ERROR_CLASS: "JSONDecodeError",
                MESSAGE: "truncated",
            }
        )
    return rows


def stream_records(kinesis: Any) -> list[tuple[bytes, str]]:
    shard = kinesis.list_shards(StreamName=STREAM)["Shards"][0]["ShardId"]
    iterator = kinesis.get_shard_iterator(
        StreamName=STREAM, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    return [
        (r["Data"], r["PartitionKey"])
        for r in kinesis.get_records(ShardIterator=iterator)["Records"]
    ]


def run(endpoints: Endpoints, cdk_json: Path, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = reprocess.main(
        [
            "--instance", INSTANCE, "--cdk-json", str(cdk_json),
            "--kafka-bootstrap", endpoints.kafka_bootstrap,
            "--kinesis-endpoint-url", endpoints.aws_url,
            *argv,
        ],
        out=out,
    )  # fmt: skip
    return code, out.getvalue()


def figures(output: str) -> dict[str, int]:
    line = next(x for x in output.splitlines() if x.startswith("figures: "))
    return {k: int(v) for k, v in re.findall(r"([\w-]+)=(\d+)", line)}


def committed(endpoints: Endpoints) -> dict[int, int | None]:
    topic = Topic(endpoints.kafka_bootstrap, "PLAINTEXT", "us-east-1", TOPIC, INSTANCE)
    reader = FailureTopicReader(topic, f"reprocess-{INSTANCE}")
    try:
        return reader.committed(list(range(PARTITIONS)))
    finally:
        reader.close()


def test_reprocess_against_the_emulators(endpoints: Endpoints, cdk_json: Path) -> None:
    kinesis = kinesis_client("us-east-1", endpoints.aws_url, FAKE_CREDENTIALS)
    ensure_stream(kinesis, STREAM, 1)
    ensure_topic(endpoints.kafka_bootstrap, TOPIC, partitions=PARTITIONS)
    settings = KafkaSettings(
        endpoints.kafka_bootstrap, TOPIC, "PLAINTEXT", "us-east-1", INSTANCE, 8_000, 4_000, 15
    )
    rows = failure_rows(12)
    assert deliver(iter(rows), settings) == 12

    # A dry run lists every record and changes nothing.
    code, output = run(endpoints, cdk_json, "--dry-run")
    assert code == 0, output
    assert output.count("would send ") == 12
    assert f"{STREAM}/shardId-000000000000/1003  not_utf8  14 B -> 20 B" in output
    assert figures(output) == {
        "read": 12,
        "skipped": 0,
        "would-send": 12,
        "rejected": 0,
        "failed": 0,
    }
    assert stream_records(kinesis) == []
    assert committed(endpoints) == dict.fromkeys(range(PARTITIONS))

    # Only one reason: the others are skipped and hold their partitions.
    code, output = run(endpoints, cdk_json, "--reason", MALFORMED_JSON, "--batch-records", "2")
    assert code == 0, output
    assert figures(output) == {"read": 12, "skipped": 6, "re-sent": 6, "rejected": 0, "failed": 0}
    first = stream_records(kinesis)
    assert sorted(first) == sorted(
        (r[schema.DATA], r[record.PARTITION_KEY.column])
        for r in rows
        if r[REASON] == MALFORMED_JSON
    ), "the original bytes, under the original partition key"
    held = committed(endpoints)
    assert "held              partition" in output

    # The next run resumes at the held records: everything left lands, and
    # the positions reach the end of every partition.
    code, output = run(endpoints, cdk_json)
    assert code == 0, output
    found = figures(output)
    assert found["skipped"] == 0 and found["failed"] == 0
    assert found["re-sent"] == found["read"] >= 6
    every = stream_records(kinesis)
    assert {d for d, _ in every} == {r[schema.DATA] for r in rows}, "nothing lost"
    assert len(every) == 6 + found["re-sent"]
    ends = committed(endpoints)
    assert sum(v or 0 for v in ends.values()) == 12
    assert all((ends[p] or 0) >= (held[p] or 0) for p in ends)

    # Nothing new: nothing read, nothing sent, and --to-time before every record reads nothing.
    code, output = run(endpoints, cdk_json)
    assert code == 0 and figures(output)["read"] == 0, output
    code, output = run(
        endpoints, cdk_json, "--from-offset", "0", "--to-time", "2000-01-01T00:00:00Z"
    )
    assert code == 0 and figures(output)["read"] == 0, output
    assert len(stream_records(kinesis)) == len(every)
