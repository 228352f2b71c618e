"""The job's configuration model: what a config file may say, and how a bad one
fails (before any Spark session) with the field path, the bad value and what
is allowed, one line per bad field."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from model.config import (
    DEFAULT_EVENT_FIELDS,
    MIN_FETCH_TIME_SEC,
    ConfigError,
    EventField,
    JobConfig,
    KafkaOptions,
    SourceOptions,
    SourceSettings,
)


def _raw(**overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "instance_id": "orders-eu-west-1",
        "region": "eu-west-1",
        "stream_name": "streaming-orders-eu-west-1",
        "database": "streaming_orders_eu_west_1",
        "checkpoint_location": "s3://bucket/checkpoints/orders",
        "kafka": {"topic": "failures", "bootstrap_servers": "127.0.0.1:9092"},
    }
    raw.update(overrides)
    return raw


def _error(raw: object) -> str:
    with pytest.raises(ConfigError) as caught:
        JobConfig.from_dict(raw)
    return str(caught.value)


# ---------------------------------------------------------------- accepted


def test_minimal_config_takes_the_declared_defaults() -> None:
    config = JobConfig.from_dict(_raw())
    assert config.source == SourceOptions()
    assert config.source.max_fetch_time_per_shard_sec == MIN_FETCH_TIME_SEC
    assert config.source.fail_on_data_loss is True
    assert config.event_fields == DEFAULT_EVENT_FIELDS
    assert (config.lease_ttl_sec, config.lease_wait_sec) == (30, 45)


def test_json_round_trip_keeps_tuples_and_equality() -> None:
    fields = [
        {"name": "id", "type": "string"},
        {"name": "at", "type": "timestamp"},
        {"name": "n", "type": "long", "required": False},
    ]
    config = JobConfig.from_dict(_raw(event_fields=fields, event_time_field="at"))
    assert isinstance(config.event_fields, tuple)
    assert config.event_fields[2] == EventField("n", "long", required=False)
    assert JobConfig.from_json(config.to_json()) == config
    assert JobConfig.from_dict(config.to_dict()) == config
    assert json.loads(config.to_json())["event_fields"][1] == {
        "name": "at",
        "type": "timestamp",
        "required": True,
    }


def test_models_are_frozen_hashable_and_picklable() -> None:
    """Spark ships the config to executors and the job uses it as a constant."""
    config = JobConfig.from_dict(_raw())
    assert hash(config) == hash(JobConfig.from_dict(_raw()))
    assert pickle.loads(pickle.dumps(config)) == config
    with pytest.raises(ValueError, match="frozen"):
        config.region = "us-east-1"  # type: ignore[misc]


def test_from_file_reads_json(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text(json.dumps(_raw(trigger_interval_sec=3)), encoding="utf-8")
    assert JobConfig.from_file(path).trigger_interval_sec == 3


def test_lease_wait_equal_to_the_ttl_is_enough() -> None:
    config = JobConfig.from_dict(_raw(lease_ttl_sec=20, lease_wait_sec=20))
    assert config.lease_wait_sec == config.lease_ttl_sec


def test_positional_event_field_takes_the_declared_defaults() -> None:
    """EventField's positional __init__ repeats the field defaults; keep them equal."""
    assert EventField("x") == EventField.model_validate({"name": "x"})


def test_job_settings_are_the_source_options_subset() -> None:
    """The instance configuration embeds SourceSettings: same fields, same
    defaults, but for the reader: an instance that chooses none gets its EMR
    release's (infra/job_config.source_choice), the job's own file always names one."""
    settings = SourceSettings()
    options = SourceOptions()
    assert set(SourceSettings.model_fields) < set(SourceOptions.model_fields)
    for name in SourceSettings.model_fields.keys() - {"format"}:
        assert getattr(settings, name) == getattr(options, name), name
    assert (settings.format, options.format) == (None, "python-kinesis")


# ---------------------------------------------------------------- rejected


def test_not_json() -> None:
    with pytest.raises(ConfigError, match=r"^s3://b/job\.json: not valid JSON"):
        JobConfig.from_json("{", "s3://b/job.json")


@pytest.mark.parametrize("raw", [[1], "config", None])
def test_document_that_is_not_an_object(raw: object) -> None:
    assert _error(raw) == f"config: bad value {raw!r}; allowed: an object"


def test_unknown_top_level_field_lists_the_allowed_names() -> None:
    message = _error(_raw(trigger_interval=5))
    assert message.startswith("trigger_interval: unknown field; allowed: ")
    assert "trigger_interval_sec" in message
    assert "checkpoint_location" in message


def test_unknown_nested_field_names_its_path() -> None:
    message = _error(_raw(source={"max_fetch_records": 5}))
    assert message.startswith("source.max_fetch_records: unknown field; allowed: ")
    assert "max_fetch_records_per_shard" in message


def test_unknown_field_of_an_event_field() -> None:
    message = _error(_raw(event_fields=[{"name": "id", "nullable": True}]))
    assert message.startswith("event_fields[0].nullable: unknown field; allowed: ")
    assert message.endswith("name, required, type")


def test_missing_required_field() -> None:
    raw = _raw()
    del raw["checkpoint_location"]
    assert "checkpoint_location: missing required field" in _error(raw)


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        ({"region": None}, "region: bad value None; allowed: a non-empty string"),
        (
            {"trigger_interval_sec": None},
            "trigger_interval_sec: bad value None; allowed: an integer",
        ),
        ({"kafka": None}, "kafka: bad value None; allowed: an object"),
        ({"source": {"fail_on_data_loss": None}}, "source.fail_on_data_loss: bad value None"),
        ({"event_fields": None}, "event_fields: bad value None; allowed: a non-empty list"),
    ],
)
def test_null_where_a_value_is_required(overrides: dict[str, Any], line: str) -> None:
    assert line in _error(_raw(**overrides))


def test_null_is_accepted_where_the_field_is_optional() -> None:
    assert JobConfig.from_dict(_raw(database_location=None)).database_location is None


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            {"source": {"starting_position": "EARLIEST"}},
            "source.starting_position: bad value 'EARLIEST'; allowed: TRIM_HORIZON | LATEST",
        ),
        (
            {"source": {"format": "kinesis"}},
            "source.format: bad value 'kinesis'; allowed: python-kinesis | aws-kinesis",
        ),
        (
            {"kafka": {"topic": "t", "bootstrap_servers": "b:1", "security": "SSL"}},
            "kafka.security: bad value 'SSL'; allowed: PLAINTEXT | MSK_IAM",
        ),
        (
            {"event_fields": [{"name": "id"}, {"name": "occurredAt", "type": "datetime"}]},
            "event_fields[1].type: bad value 'datetime'; "
            "allowed: string | int | long | float | double",
        ),
    ],
)
def test_value_outside_an_enum(overrides: dict[str, Any], line: str) -> None:
    assert line in _error(_raw(**overrides))


@pytest.mark.parametrize(
    ("overrides", "line"),
    [
        (
            {"trigger_interval_sec": "10"},
            "trigger_interval_sec: bad value '10'; allowed: an integer",
        ),
        (
            {"trigger_interval_sec": True},
            "trigger_interval_sec: bad value True; allowed: an integer",
        ),
        ({"trigger_interval_sec": 1.5}, "trigger_interval_sec: bad value 1.5; allowed: an integer"),
        ({"metrics": {"enabled": 1}}, "metrics.enabled: bad value 1; allowed: true or false"),
        ({"table": ""}, "table: bad value ''; allowed: a non-empty string"),
        ({"table": 7}, "table: bad value 7; allowed: a non-empty string"),
    ],
)
def test_wrong_json_type_is_not_coerced(overrides: dict[str, Any], line: str) -> None:
    assert line in _error(_raw(**overrides))


@pytest.mark.parametrize(
    "field", ["trigger_interval_sec", "max_record_bytes", "lease_ttl_sec", "stop_poll_interval_sec"]
)
def test_non_positive_numbers(field: str) -> None:
    assert f"{field}: bad value 0; allowed: an integer > 0" in _error(_raw(**{field: 0}))


def test_fetch_time_below_the_connector_minimum() -> None:
    message = _error(_raw(source={"max_fetch_time_per_shard_sec": MIN_FETCH_TIME_SEC - 1}))
    assert message == (
        "source.max_fetch_time_per_shard_sec: bad value 9; "
        "allowed: an integer >= 10 (the Kinesis connector's minimum)"
    )


def test_duplicate_event_field() -> None:
    fields = [{"name": "id"}, {"name": "occurredAt", "type": "timestamp"}, {"name": "id"}]
    message = _error(_raw(event_fields=fields))
    assert message == (
        "event_fields[2].name: bad value 'id'; allowed: a name not used by another event field"
    )


def test_empty_event_schema() -> None:
    assert "event_fields: bad value (); allowed: a non-empty list" in _error(_raw(event_fields=[]))


@pytest.mark.parametrize(
    ("fields", "overrides", "line"),
    [
        # id_field must name a declared field ...
        (
            [{"name": "id"}, {"name": "at", "type": "timestamp"}],
            {"id_field": "key", "event_time_field": "at"},
            "id_field: bad value 'key'; allowed: the name of a required string field of "
            "event_fields (declared: id, at)",
        ),
        # ... that is a string ...
        (
            [{"name": "id", "type": "long"}, {"name": "occurredAt", "type": "timestamp"}],
            {},
            "id_field: bad value 'id'; allowed: the name of a required string field",
        ),
        # ... and required.
        (
            [{"name": "id", "required": False}, {"name": "occurredAt", "type": "timestamp"}],
            {},
            "id_field: bad value 'id'; allowed: the name of a required string field",
        ),
        # event_time_field must name a required timestamp.
        (
            [{"name": "id"}, {"name": "occurredAt", "type": "string"}],
            {},
            "event_time_field: bad value 'occurredAt'; allowed: the name of a required "
            "timestamp field",
        ),
        (
            [{"name": "id"}, {"name": "occurredAt", "type": "timestamp", "required": False}],
            {},
            "event_time_field: bad value 'occurredAt'; allowed: the name of a required "
            "timestamp field",
        ),
    ],
)
def test_id_and_event_time_field_rules(
    fields: list[dict[str, Any]], overrides: dict[str, Any], line: str
) -> None:
    assert line in _error(_raw(event_fields=fields, **overrides))


@pytest.mark.parametrize(
    ("overrides", "start"),
    [
        pytest.param(
            {"lease_ttl_sec": 60, "lease_wait_sec": 59},
            "lease_wait_sec: bad value 59; allowed: >= lease_ttl_sec (60)",
            id="lease wait shorter than the ttl",
        ),
        pytest.param(
            {"stream_retention_hours": 48, "dedup_horizon_hours": 47},
            "dedup_horizon_hours: bad value 47; allowed: >= the stream's retention (48 h)",
            id="horizon shorter than the retention",
        ),
    ],
)
def test_a_setting_below_its_floor_is_refused(overrides: dict[str, Any], start: str) -> None:
    assert _error(_raw(**overrides)).startswith(start)


def test_the_horizon_is_checked_first_and_may_equal_the_retention() -> None:
    """Both below their floors: the horizon is named; equal to its floor: accepted."""
    equal = JobConfig.from_dict(_raw(stream_retention_hours=48, dedup_horizon_hours=48))
    assert equal.dedup_horizon_hours == equal.stream_retention_hours
    both = _raw(stream_retention_hours=48, dedup_horizon_hours=47, lease_wait_sec=1)
    assert _error(both).startswith("dedup_horizon_hours: bad value 47")


@pytest.mark.parametrize(
    "kafka",
    [
        {"topic": "t"},
        {"topic": "t", "bootstrap_servers": "b:1", "cluster_arn": "arn:aws:kafka:x"},
    ],
)
def test_kafka_needs_exactly_one_of_brokers_or_cluster(kafka: dict[str, Any]) -> None:
    message = _error(_raw(kafka=kafka))
    assert message.startswith("kafka: bad value {'bootstrap_servers': ")
    assert message.endswith(
        "allowed: exactly one of bootstrap_servers (local) or cluster_arn (MSK)"
    )


def test_efo_without_a_consumer_name() -> None:
    message = _error(_raw(source={"format": "aws-kinesis", "consumer_type": "SubscribeToShard"}))
    assert message.startswith("source.consumer_name: bad value None; allowed: a consumer name")


def test_every_bad_field_is_reported_on_its_own_line() -> None:
    message = _error(_raw(region=None, source={"starting_position": "NOW"}, colour="blue"))
    lines = message.splitlines()
    assert len(lines) == 3
    assert {line.split(":", 1)[0] for line in lines} == {
        "region",
        "source.starting_position",
        "colour",
    }


def test_a_model_built_in_code_fails_like_a_file() -> None:
    """ConfigError, not pydantic's error, whichever way the config is made."""
    with pytest.raises(ConfigError, match="exactly one of bootstrap_servers"):
        KafkaOptions(topic="t")
    with pytest.raises(ConfigError, match=r"^type: bad value 'uuid'; allowed: string \|"):
        EventField("id", "uuid")  # type: ignore[arg-type]
