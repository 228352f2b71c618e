"""``job.sources.kinesis_options``: the reader's options as Spark hands them,
their defaults, and the error naming a bad one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from job.sources.kinesis_options import METADATA_PATH, parse_duration_ms, parse_options
from model.config import SourceOptions


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"kinesis.streamName": ""}, "kinesis.streamName"),
        ({"kinesis.consumerType": "SubscribeToShard"}, "kinesis.consumerName"),
        ({"kinesis.consumerType": "HTTP2Push"}, "kinesis.consumerType"),
        ({"kinesis.metadataPath": ""}, "kinesis.metadataPath"),
        ({"kinesis.python.readTasks": "0"}, "kinesis.python.readTasks"),
        ({"kinesis.startingPosition": "OLDEST"}, "kinesis.startingPosition"),
        ({"kinesis.startingPosition": "AT_TIMESTAMP 2024-01-01T00:00:00"}, "offset"),
        ({"kinesis.describeShardInterval": "soon"}, "kinesis.describeShardInterval"),
        ({"kinesis.maxFetchRecordsPerShard": "0"}, "kinesis.maxFetchRecordsPerShard"),
        ({"kinesis.maxFetchTimePerShardSec": "9"}, "kinesis.maxFetchTimePerShardSec"),
        ({"kinesis.failOnDataLoss": "yes"}, "kinesis.failOnDataLoss"),
    ],
)
def test_python_source_rejects_bad_options(override: dict[str, str], message: str) -> None:
    options = {
        "kinesis.streamName": "s",
        "kinesis.region": "us-east-1",
        "kinesis.metadataPath": "/tmp/ends",
        **override,
    }
    with pytest.raises(ValueError, match=message):
        parse_options(options)


def test_python_source_defaults_are_the_job_config_defaults() -> None:
    """A direct format("python-kinesis") user who sets only the stream reads
    like the job with a default config does."""
    job = SourceOptions()
    options = parse_options(
        {"kinesis.streamName": "s", "kinesis.region": "us-east-1", METADATA_PATH: "/tmp/e"}
    )
    assert options.read_tasks is None  # one task per shard
    assert options.starting_position.kind == job.starting_position
    assert options.describe_shard_interval_ms == job.describe_shard_interval_sec * 1000
    assert options.max_fetch_records_per_shard == job.max_fetch_records_per_shard
    assert options.max_fetch_time_per_shard_sec == job.max_fetch_time_per_shard_sec
    assert options.fail_on_data_loss is job.fail_on_data_loss is True


def test_starting_position_at_timestamp_and_durations() -> None:
    options = parse_options(
        {
            "KINESIS.STREAMNAME": "s",
            "kinesis.region": "eu-west-1",
            "KINESIS.METADATAPATH": "/tmp/e",
            "kinesis.startingPosition": "AT_TIMESTAMP 2023-08-30T19:00:05-08:00",
        }
    )
    assert options.starting_position.kind == "AT_TIMESTAMP"
    assert (
        options.starting_position.timestamp
        == datetime(2023, 8, 31, 3, 0, 5, tzinfo=UTC).timestamp()
    )
    assert [parse_duration_ms("x", v) for v in ("250", "100ms", "30s", "2m")] == [
        250,
        100,
        30_000,
        120_000,
    ]
