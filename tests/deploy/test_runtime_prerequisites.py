"""Runtime prerequisites on the node: the job refuses to
start, exit 2 with the fix, when the ``aws-kinesis`` format does not resolve."""

from __future__ import annotations

from typing import Any

import pytest

from job.sources import aws_kinesis, read_stream
from model.config import ConfigError, JobConfig, KafkaOptions

REGION = "eu-west-1"


def _config() -> JobConfig:
    return JobConfig.from_dict(
        {
            "instance_id": f"orders-{REGION}",
            "region": REGION,
            "stream_name": f"streaming-orders-{REGION}",
            "database": "streaming_orders_eu_west_1",
            "checkpoint_location": "s3://data/checkpoints/orders-eu-west-1/",
            "kafka": KafkaOptions(
                topic="t", bootstrap_servers="localhost:9092", security="PLAINTEXT"
            ).model_dump(),
            "source": {"format": "aws-kinesis"},
        }
    )


def _missing(name: str) -> object:
    raise RuntimeError(f"[DATA_SOURCE_NOT_FOUND] Failed to find the data source: {name}.")


def test_a_missing_connector_is_a_config_error_naming_the_jar_and_the_fix() -> None:
    with pytest.raises(ConfigError) as caught:
        aws_kinesis.require_connector(object(), lookup=_missing)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "'aws-kinesis' does not resolve" in message
    assert "DATA_SOURCE_NOT_FOUND" in message
    assert "/usr/share/aws/kinesis/spark-sql-kinesis/lib/" in message
    assert "bootstrap/jars.lock" in message and "jar_artifacts" in message


def test_a_resolving_connector_passes() -> None:
    asked: list[str] = []
    aws_kinesis.require_connector(object(), lookup=asked.append)  # type: ignore[arg-type]
    assert asked == ["aws-kinesis"]  # it looked the format up, and that raised nothing


def test_read_stream_checks_before_building_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the check, read_stream would reach spark.readStream (this fake
    has none) instead of raising the ConfigError the job maps to exit 2."""
    monkeypatch.setattr(aws_kinesis, "_jvm_lookup", lambda spark: _missing)
    with pytest.raises(ConfigError, match="spark-sql-kinesis"):
        read_stream(object(), _config())  # type: ignore[arg-type]


def test_the_real_lookup_raises_for_an_absent_connector(spark: Any) -> None:
    """The local session has no awslabs connector: Spark's own lookup fails and
    the job's check turns it into the ConfigError (the py4j path works)."""
    aws_kinesis._jvm_lookup(spark)("parquet")  # control: the lookup itself works
    with pytest.raises(ConfigError, match="does not resolve") as caught:
        aws_kinesis.require_connector(spark)
    assert "aws-kinesis" in str(caught.value.__cause__)


def test_the_job_logs_which_source_runs_and_why(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The stack's reason (infra/job_config.source_choice) reaches the start-up log."""
    config = _config()
    chosen = config.model_copy(
        update={
            "source": config.source.model_copy(
                update={"format_reason": "chosen by the instance (job.source.format)"}
            )
        }
    )
    monkeypatch.setattr(aws_kinesis, "_jvm_lookup", lambda spark: _missing)
    with caplog.at_level("INFO", logger="job.sources"), pytest.raises(ConfigError):
        read_stream(object(), chosen)  # type: ignore[arg-type]
    assert (
        "Kinesis source aws-kinesis (GetRecords): chosen by the instance (job.source.format)"
        in caplog.messages
    )
