"""The job's configuration: one typed, validated object read once at start.

The CDK app serializes it per instance (``to_dict``) and uploads it next to the
artifact; the local run builds it from the same instance configuration. A bad
file fails here, before a Spark session exists, with the field named.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Final, Literal, TypeVar, cast, get_args

from app import contract

StartingPosition = Literal["TRIM_HORIZON", "LATEST"]
SourceFormat = Literal["python-kinesis", "aws-kinesis"]
ConsumerType = Literal["GetRecords", "SubscribeToShard"]
KafkaSecurity = Literal["PLAINTEXT", "MSK_IAM"]
FieldType = Literal["string", "long", "double", "boolean", "timestamp", "object", "array"]


# The awslabs connector rejects a shorter per-shard fetch time; the Python
# source keeps the same floor so a config works with either reader.
MIN_FETCH_TIME_SEC: Final = 10


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
class EventField:
    """One top-level field of the JSON events. ``timestamp`` fields are ISO-8601
    strings (up to 9 fractional digits, optional offset); ``object``/``array``
    fields are kept as JSON text in the table."""

    name: str
    type: FieldType = "string"
    required: bool = True


DEFAULT_EVENT_FIELDS: tuple[EventField, ...] = (
    EventField("id", "string"),
    EventField("type", "string"),
    EventField("occurredAt", "timestamp"),
    EventField("payload", "object"),
)


@dataclass(frozen=True)
class JobConfig:
    instance_id: str
    region: str
    stream_name: str
    database: str
    checkpoint_location: str
    kafka: KafkaOptions
    table: str = contract.EVENTS_TABLE
    database_location: str | None = None
    trigger_interval_sec: int = 10
    kinesis_endpoint_url: str | None = None
    s3_endpoint_url: str | None = None
    stop_marker_path: str | None = None
    max_record_bytes: int = 1_048_576
    source: SourceOptions = field(default_factory=SourceOptions)
    metrics: MetricsOptions = field(default_factory=MetricsOptions)
    # The event schema; ``id_field`` (a required string) is the de-duplication
    # key and ``event_time_field`` (a required timestamp) orders versions of an
    # id and gives the table's date partition.
    event_fields: tuple[EventField, ...] = DEFAULT_EVENT_FIELDS
    id_field: str = "id"
    event_time_field: str = "occurredAt"
    # Single-writer lease beside the checkpoint: renewed every ttl/3; a new
    # copy waits at most ``lease_wait_sec`` for a stale lease to expire.
    lease_ttl_sec: int = 30
    lease_wait_sec: int = 45
    stop_poll_interval_sec: int = 2
    graceful_stop_timeout_sec: int = 300

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: object) -> JobConfig:
        config = _build(cls, raw, "")
        fetch_time = config.source.max_fetch_time_per_shard_sec
        if fetch_time < MIN_FETCH_TIME_SEC:
            raise ConfigError(
                f"source.max_fetch_time_per_shard_sec: {fetch_time} is below the minimum of "
                f"{MIN_FETCH_TIME_SEC} seconds (the Kinesis connector rejects less)"
            )
        if (config.kafka.bootstrap_servers is None) == (config.kafka.cluster_arn is None):
            raise ConfigError(
                "kafka: set exactly one of bootstrap_servers (local) or cluster_arn (MSK)"
            )
        _check_event_fields(config)
        if config.lease_wait_sec < config.lease_ttl_sec:
            raise ConfigError(
                f"lease_wait_sec: {config.lease_wait_sec} must be >= lease_ttl_sec "
                f"({config.lease_ttl_sec}), or a restart after a crash could never "
                "outwait the dead copy's lease"
            )
        return config

    @classmethod
    def from_file(cls, path: str | Path) -> JobConfig:
        text = Path(path).read_text(encoding="utf-8")
        return cls.from_json(text, str(path))

    @classmethod
    def from_json(cls, text: str, origin: str = "config") -> JobConfig:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{origin}: not valid JSON: {exc}") from exc
        return cls.from_dict(raw)


def _check_event_fields(config: JobConfig) -> None:
    by_name: dict[str, EventField] = {}
    for index, item in enumerate(config.event_fields):
        if item.name in by_name:
            raise ConfigError(f"event_fields[{index}].name: {item.name!r} appears twice")
        by_name[item.name] = item
    for attr, wanted in (("id_field", "string"), ("event_time_field", "timestamp")):
        name = getattr(config, attr)
        spec = by_name.get(name)
        if spec is None or spec.type != wanted or not spec.required:
            raise ConfigError(
                f"{attr}: {name!r} must name a required {wanted} field of event_fields "
                f"(have: {', '.join(by_name) or 'none'})"
            )


_NESTED: dict[str, type[Any]] = {
    "kafka": KafkaOptions,
    "source": SourceOptions,
    "metrics": MetricsOptions,
}
# Fields holding a list of objects: the element type.
_NESTED_LISTS: dict[str, type[Any]] = {"event_fields": EventField}

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
    "lease_ttl_sec",
    "lease_wait_sec",
    "stop_poll_interval_sec",
    "graceful_stop_timeout_sec",
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
        elif name in _NESTED_LISTS:
            if not isinstance(value, list | tuple) or not value:
                raise ConfigError(f"{path}: expected a non-empty list, got {value!r}")
            values[name] = tuple(
                _build(_NESTED_LISTS[name], item, f"{path}[{i}].") for i, item in enumerate(value)
            )
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
        "FieldType": FieldType,
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
