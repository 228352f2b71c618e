"""The job's configuration: one typed, validated object read once at start.

The CDK app serializes it per instance (``to_dict``) and uploads it next to the
artifact; the local run builds it from the same instance configuration. A bad
file fails here, before a Spark session exists, with the field named.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, cast, get_args

StartingPosition = Literal["TRIM_HORIZON", "LATEST"]
SourceFormat = Literal["python-kinesis", "aws-kinesis"]
ConsumerType = Literal["GetRecords", "SubscribeToShard"]
KafkaSecurity = Literal["PLAINTEXT", "MSK_IAM"]


class ConfigError(ValueError):
    """A job configuration that cannot run; the message names the field."""


@dataclass(frozen=True)
class SourceOptions:
    format: SourceFormat = "python-kinesis"
    starting_position: StartingPosition = "TRIM_HORIZON"
    max_fetch_records_per_shard: int = 10_000
    max_fetch_time_per_shard_sec: int = 10
    describe_shard_interval_sec: int = 30
    consumer_type: ConsumerType = "GetRecords"
    consumer_name: str | None = None
    fail_on_data_loss: bool = True


@dataclass(frozen=True)
class KafkaOptions:
    """Where failure records go. On MSK the job resolves the IAM bootstrap
    brokers from ``cluster_arn`` at start (they are not known at synth time);
    locally ``bootstrap_servers`` points at the tansu broker."""

    topic: str
    bootstrap_servers: str | None = None
    cluster_arn: str | None = None
    security: KafkaSecurity = "PLAINTEXT"
    delivery_timeout_ms: int = 30_000
    request_timeout_ms: int = 10_000
    flush_timeout_sec: int = 45


@dataclass(frozen=True)
class MetricsOptions:
    enabled: bool = True
    endpoint_url: str | None = None
    timeout_sec: int = 5
    max_attempts: int = 3


@dataclass(frozen=True)
class JobConfig:
    instance_id: str
    region: str
    stream_name: str
    database: str
    checkpoint_location: str
    kafka: KafkaOptions
    table: str = "events"
    database_location: str | None = None
    trigger_interval_sec: int = 10
    kinesis_endpoint_url: str | None = None
    s3_endpoint_url: str | None = None
    stop_marker_path: str | None = None
    max_record_bytes: int = 1_048_576
    source: SourceOptions = field(default_factory=SourceOptions)
    metrics: MetricsOptions = field(default_factory=MetricsOptions)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: object) -> JobConfig:
        config = _build(cls, raw, "")
        if (config.kafka.bootstrap_servers is None) == (config.kafka.cluster_arn is None):
            raise ConfigError(
                "kafka: set exactly one of bootstrap_servers (local) or cluster_arn (MSK)"
            )
        return config

    @classmethod
    def from_file(cls, path: str | Path) -> JobConfig:
        text = Path(path).read_text(encoding="utf-8")
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: not valid JSON: {exc}") from exc
        return cls.from_dict(raw)


_NESTED: dict[str, type[Any]] = {
    "kafka": KafkaOptions,
    "source": SourceOptions,
    "metrics": MetricsOptions,
}

_POSITIVE = {
    "trigger_interval_sec",
    "max_record_bytes",
    "max_fetch_records_per_shard",
    "max_fetch_time_per_shard_sec",
    "describe_shard_interval_sec",
    "delivery_timeout_ms",
    "request_timeout_ms",
    "flush_timeout_sec",
    "timeout_sec",
    "max_attempts",
}

T = TypeVar("T")


def _build(cls: type[T], raw: object, prefix: str) -> T:
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix or 'config'}: expected an object, got {raw!r}")
    known = {f.name: f for f in fields(cast(Any, cls))}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ConfigError(
            f"{prefix}{unknown[0]}: unknown field; allowed: {', '.join(sorted(known))}"
        )
    values: dict[str, Any] = {}
    for name, f in known.items():
        path = f"{prefix}{name}"
        if name not in raw:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ConfigError(f"{path}: missing required field")
            continue
        value = raw[name]
        if name in _NESTED:
            values[name] = _build(_NESTED[name], value, f"{path}.")
        else:
            values[name] = _check(path, name, f.type, value)
    return cls(**values)


def _check(path: str, name: str, annotation: object, value: object) -> object:
    text = str(annotation)
    optional = "None" in text
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{path}: must not be null")
    literal = {
        "StartingPosition": StartingPosition,
        "SourceFormat": SourceFormat,
        "ConsumerType": ConsumerType,
        "KafkaSecurity": KafkaSecurity,
    }.get(text.split(" ", maxsplit=1)[0].strip("'"))
    if literal is not None:
        allowed = get_args(literal)
        if value not in allowed:
            raise ConfigError(f"{path}: {value!r} is not one of {', '.join(allowed)}")
        return value
    if text.startswith("bool"):
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: expected true or false, got {value!r}")
        return value
    if text.startswith("int"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: expected an integer, got {value!r}")
        if name in _POSITIVE and value <= 0:
            raise ConfigError(f"{path}: must be > 0, got {value}")
        return value
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{path}: expected a non-empty string, got {value!r}")
    return value
