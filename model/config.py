"""The job's configuration: one typed, validated object read once at start.

The CDK app serializes it per instance (``to_dict``) and uploads it next to the
artifact; the local run builds it from the same instance configuration. A bad
file fails here, before a Spark session exists, with every bad field named,
its value and what is allowed.

The models are pydantic v2, strict (JSON types only: ``"4"`` is not an
integer, ``1`` is not ``true``), frozen and closed (an unknown field is a
typo, not an extension). Each field's default is declared once, here: the
instance configuration (:mod:`infra.config`) embeds :class:`JobSettings` for
what a deployment may choose, and the Python Kinesis reader takes its defaults
from :class:`SourceOptions`. The model kit and the error formatting are
:mod:`model.config_kit`, shared with :mod:`infra.config`, which prefixes each
line with the instance.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import (
    Annotated,
    Any,
    Final,
    Literal,
    Self,
)

from annotated_types import Ge, Gt
from pydantic import (
    BaseModel,
    Field,
    PositiveInt,
    ValidationError,
    model_validator,
)

from model import contract, record
from model.config_kit import Allowed, ConfigModel, JsonTuple, at_least, bad_value, problems
from model.failure_limits import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_MAX_MESSAGE_BYTES,
    MIN_MAX_MESSAGE_BYTES,
)

StartingPosition = Literal["TRIM_HORIZON", "LATEST"]
SourceFormat = Literal["python-kinesis", "aws-kinesis"]
# The folder inside the checkpoint where python-kinesis records batch ends.
KINESIS_ENDS_DIR: Final = "_kinesis_ends"
ConsumerType = Literal["GetRecords", "SubscribeToShard"]
KafkaSecurity = Literal["PLAINTEXT", "MSK_IAM"]
FieldType = Literal[
    "string", "int", "long", "float", "double", "boolean", "timestamp", "object", "array"
]


# THE failure-record size, declared once for the job (KafkaOptions) and the
# instance (infra.config.KafkaConfig): the producer's message.max.bytes, from
# which the topic's max.message.bytes and the claim-check threshold derive.
MaxMessageBytes = Annotated[
    int,
    Field(
        ge=MIN_MAX_MESSAGE_BYTES,
        le=MAX_MAX_MESSAGE_BYTES,
        description="the producer's message.max.bytes; model/failure_limits.py",
    ),
]

# The awslabs connector rejects a shorter per-shard fetch time; the Python
# source keeps the same floor so a config works with either reader.
MIN_FETCH_TIME_SEC: Final = 10


class ConfigError(ValueError):
    """A job configuration that cannot run; one line per bad field, each naming it."""


class _JobModel(ConfigModel):
    """A job model built in code (``JobConfig(...)``) fails like a file does:
    with :class:`ConfigError`, not pydantic's own error."""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _config_error(exc, type(self)) from exc

    # Without this mark pydantic would route every validation, nested ones
    # included, through this __init__, and a nested model's ConfigError would
    # reach the parent as one error without its field path. pydantic marks its
    # own BaseModel.__init__ so (pydantic-settings does the same);
    # tests/model/test_config.py fails if nested paths are lost.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


def _config_error(error: ValidationError, model: type[BaseModel]) -> ConfigError:
    lines = [f"{p.path or 'config'}: {p.text}" for p in problems(error, model)]
    return ConfigError("\n".join(lines))


# --------------------------------------------------------------------------- the job's models


class SourceSettings(_JobModel):
    """The Kinesis source options a deployment chooses per instance
    (``cdk.json`` → ``job.source``; :mod:`infra.config` embeds this model).

    ``starting_position`` applies only when the checkpoint is empty; the default
    TRIM_HORIZON never silently skips data on a first start (docs/design.md, "Incidents").
    """

    starting_position: StartingPosition = "TRIM_HORIZON"
    max_fetch_records_per_shard: PositiveInt = 10_000
    max_fetch_time_per_shard_sec: int = Field(
        default=MIN_FETCH_TIME_SEC,
        ge=MIN_FETCH_TIME_SEC,
        description="the Kinesis connector's minimum",
    )
    describe_shard_interval_sec: PositiveInt = 30
    # SubscribeToShard: enhanced fan-out, through the consumer the job
    # registers at start (either reader; job/sources/kinesis_efo.py for python-kinesis).
    consumer_type: ConsumerType = "GetRecords"
    # None: the EMR release's default reader (emr/releases.py).
    format: SourceFormat | None = None


class SourceOptions(SourceSettings):
    """Everything the reader gets: the settings plus what the stack derives
    (the reader, why it was chosen, the enhanced fan-out consumer) and what is
    not negotiable per instance (an expired or vanished shard stops the query)."""

    format: SourceFormat = "python-kinesis"
    # Why this reader runs, as the stack decided it: the job logs it at start.
    format_reason: str | None = None
    consumer_name: str | None = None
    # The stack's enhanced fan-out consumer (AWS::Kinesis::StreamConsumer,
    # infra/constructs/stream.py), by ARN: the job subscribes through it and
    # never registers one. None: the reader registers ``consumer_name``
    # itself (a direct format("python-kinesis") user).
    consumer_arn: str | None = None
    fail_on_data_loss: bool = True

    @model_validator(mode="after")
    def _efo_needs_a_consumer(self) -> Self:
        if self.consumer_type == "SubscribeToShard" and self.consumer_name is None:
            raise bad_value(
                None,
                "a consumer name when consumer_type is SubscribeToShard "
                "(the enhanced fan-out consumer to register)",
                "consumer_name",
            )
        return self


class KafkaOptions(_JobModel):
    """Where failure records go. On MSK the job resolves the IAM bootstrap
    brokers from ``cluster_arn`` at start (they are not known at synth time);
    locally ``bootstrap_servers`` points at the tansu broker."""

    topic: str
    bootstrap_servers: str | None = None
    cluster_arn: str | None = None
    security: KafkaSecurity = "PLAINTEXT"
    delivery_timeout_ms: PositiveInt = 30_000
    request_timeout_ms: PositiveInt = 10_000
    flush_timeout_sec: PositiveInt = 45
    # The producer's message.max.bytes; the topic's max.message.bytes and the
    # claim-check threshold derive from it (model/failure_limits.py). The stack
    # sets it from the instance's kafka.max_message_bytes.
    max_message_bytes: MaxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES

    @model_validator(mode="after")
    def _one_cluster(self) -> Self:
        if (self.bootstrap_servers is None) == (self.cluster_arn is None):
            raise bad_value(
                {"bootstrap_servers": self.bootstrap_servers, "cluster_arn": self.cluster_arn},
                "exactly one of bootstrap_servers (local) or cluster_arn (MSK)",
            )
        return self


class MetricsOptions(_JobModel):
    """CloudWatch publishing. ``max_attempts`` keeps botocore's legacy name and
    meaning: retries after the first call (``retries={"max_attempts": n}``)."""

    enabled: bool = True
    endpoint_url: str | None = None
    timeout_sec: PositiveInt = 5
    max_attempts: PositiveInt = 3


CatalogType = Literal["glue", "sql"]


class CatalogOptions(_JobModel):
    """Where the events table is registered: the instance's Glue database on
    AWS, or a SQLite catalog (pyiceberg's ``SqlCatalog``) locally. ``warehouse``
    is where a SQL catalog puts new tables (``file://`` or ``s3://``); Glue
    tables live at their database's location."""

    type: CatalogType = "glue"
    uri: str | None = None
    warehouse: str | None = None
    endpoint_url: str | None = None
    # Attempts at a catalog call (load, commit) before the batch fails; the
    # batch is then replayed from the same offsets when the job restarts.
    max_attempts: PositiveInt = 5
    retry_wait_sec: Annotated[float, Gt(0)] = 1.0

    @model_validator(mode="after")
    def _sql_needs_uri(self) -> Self:
        if self.type == "sql" and (self.uri is None or self.warehouse is None):
            raise bad_value(
                None, "a SQLAlchemy URI and a warehouse location for a sql catalog", "uri"
            )
        return self


class EventField(_JobModel):
    """One top-level field of the JSON events. ``timestamp`` fields are ISO-8601
    strings (up to 9 fractional digits, optional offset); ``object``/``array``
    fields are kept as JSON text in the table."""

    name: str
    type: FieldType = "string"
    required: bool = True

    def __init__(self, name: str, type: FieldType = "string", required: bool = True) -> None:
        """Positional too (``EventField("at", "timestamp")``): schemas are
        written as short lists of these. Keep the defaults equal to the fields'
        (tests/model/test_config.py checks)."""
        super().__init__(name=name, type=type, required=required)

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]  # see _JobModel


DEFAULT_EVENT_FIELDS: tuple[EventField, ...] = (
    EventField("id", "string"),
    EventField("type", "string"),
    EventField("occurredAt", "timestamp"),
    EventField("payload", "object"),
)


# Column names an event field's column may not take (compared in lower case:
# Spark resolves names case-insensitively): every column the job itself puts
# beside the event's, in the source rows, the classification and the table,
# all read from the record vocabulary (model.record).
RESERVED_COLUMNS: Final = frozenset(
    name.lower()
    for name in (
        *(n for n, _ in record.SEED_COLUMNS),
        *(n for n, _ in record.EVOLVED_COLUMNS),
        *record.SOURCE_COLUMNS,
        *record.CLASSIFICATION_COLUMNS,
    )
)
# Glue takes column names of 1-255 characters
# (https://docs.aws.amazon.com/glue/latest/webapi/API_Column.html).
_COLUMN_PATTERN: Final = re.compile(r"[a-z][a-z0-9_]{0,254}")


def _column_problem(column: str, taken: dict[str, str]) -> str | None:
    """Why an event field's table column ``column`` cannot be, or None.
    ``taken`` maps the columns of the fields before it to their field."""
    if _COLUMN_PATTERN.fullmatch(column) is None:
        return (
            f"a name whose table column ({column!r}) starts with a letter "
            "(the job's own working columns start with '_'), at most 255 characters"
        )
    if column in RESERVED_COLUMNS:
        return (
            f"a name whose table column ({column!r}) is not one of the job's own "
            f"columns: {', '.join(sorted(RESERVED_COLUMNS))}"
        )
    if column in taken:
        return (
            f"a name whose table column ({column!r}) no other field has "
            f"(field {taken[column]!r} has it)"
        )
    return None


class TableMaintenance(_JobModel):
    """How the events table's history stays bounded (docs/job.md, "The events
    table"). The job reads it (snapshot expiry after its own commits, table
    properties) and so does the stack (the Glue table optimizers), so both
    apply the same numbers.

    Expiring a snapshot only drops it from the table's metadata; the files only
    it referenced become orphans, which the Glue orphan-file optimizer (AWS) or
    ``python -m local.maintain`` (locally) deletes after
    ``orphan_file_retention_days``.
    """

    # The Glue retention optimizer's age (whole days, at least one).
    snapshot_retention_hours: PositiveInt = 24
    # The job keeps at most this many snapshots (plus up to expire_every_batches
    # between two expiries): each commit copies the snapshot list, so its cost
    # grows with what is kept. Expiry is a metadata-only commit every n-th batch.
    snapshots_to_retain: PositiveInt = 100
    expire_every_batches: PositiveInt = 60
    # Manifests are merged once this many are small enough to merge (Iceberg's
    # ``commit.manifest.min-count-to-merge``), so the manifest list stays short.
    manifests_to_merge: Annotated[int, Ge(2)] = 20
    # metadata.json files kept after a commit (``write.metadata.previous-versions-max``).
    metadata_versions_kept: PositiveInt = 20
    orphan_file_retention_days: PositiveInt = 3
    compaction: bool = True


class JobSettings(_JobModel):
    """The part of the job's configuration a deployment chooses per instance
    (``cdk.json`` → ``job``; embedded by :class:`infra.config.InstanceConfig`).
    :class:`JobConfig` adds what the stack derives from the instance."""

    trigger_interval_sec: PositiveInt = 10
    source: SourceSettings = Field(default_factory=SourceSettings)
    # Events re-sent within this many hours (by Kinesis arrival time) are
    # dropped as duplicates; the state store holds one key per event for that
    # long. Never below the stream's retention: the de-duplication watermark
    # runs on arrival time, and a shorter delay would let Spark silently drop
    # readable records of a shard that is behind (docs/job.md).
    dedup_horizon_hours: PositiveInt = 24
    table_maintenance: TableMaintenance = Field(default_factory=TableMaintenance)
    # The instance's event schema (``cdk.json`` → ``job.event_fields``,
    # ``job.id_field``, ``job.event_time_field``; docs/infra.md, "Event
    # schema"): the job checks records against it and the stack's Glue table
    # has its columns. ``id_field`` (a required string) is the de-duplication
    # key; ``event_time_field`` (a required timestamp) orders versions of an id
    # and gives the table's date partition.
    # Non-empty by a rule, not min_length: pydantic also reports a too-short
    # tuple when only an item is bad (it counts the valid items).
    event_fields: Annotated[
        JsonTuple[EventField], Allowed(lambda fields: len(fields) > 0, "a non-empty list")
    ] = DEFAULT_EVENT_FIELDS
    id_field: str = "id"
    event_time_field: str = "occurredAt"

    @model_validator(mode="after")
    def _event_schema_keys(self) -> Self:
        """Each field becomes a table column (``column_name``); two fields may
        not share one, nor take a column the job already has, or the table
        and the job's frames would hold a name twice."""
        by_name: dict[str, EventField] = {}
        owner: dict[str, str] = {}
        for index, item in enumerate(self.event_fields):
            if item.name in by_name:
                raise bad_value(
                    item.name,
                    "a name not used by another event field",
                    "event_fields",
                    index,
                    "name",
                )
            by_name[item.name] = item
            for column, _ in record.field_columns(item.name, item.type):
                problem = _column_problem(column, owner)
                if problem is not None:
                    raise bad_value(item.name, problem, "event_fields", index, "name")
                owner[column] = item.name
        have = ", ".join(by_name)
        for attr, wanted in (("id_field", "string"), ("event_time_field", "timestamp")):
            name = getattr(self, attr)
            spec = by_name.get(name)
            if spec is None or spec.type != wanted or not spec.required:
                raise bad_value(
                    name,
                    f"the name of a required {wanted} field of event_fields (declared: {have})",
                    attr,
                )
        return self


class JobConfig(JobSettings):
    instance_id: str
    region: str
    stream_name: str
    database: str
    checkpoint_location: str
    kafka: KafkaOptions
    table: str = contract.EVENTS_TABLE
    database_location: str | None = None
    # The stream's retention (the stack sets it from ``stream.retention_hours``).
    stream_retention_hours: PositiveInt = 24
    catalog: CatalogOptions = Field(default_factory=CatalogOptions)
    kinesis_endpoint_url: str | None = None
    s3_endpoint_url: str | None = None
    stop_marker_path: str | None = None
    # The claim-check store: where a failure record's original bytes go when
    # they are too large for the failure topic (an s3:// prefix or a local
    # directory; the stack sets s3://<data bucket>/failures/<instance>/).
    # None: ``_failures/`` inside the checkpoint location (failure_store_uri).
    failure_store_location: str | None = None
    max_record_bytes: PositiveInt = 1_048_576
    source: SourceOptions = Field(default_factory=SourceOptions)
    metrics: MetricsOptions = Field(default_factory=MetricsOptions)
    # Single-writer lease beside the checkpoint: renewed every ttl/3; a new
    # copy waits at most ``lease_wait_sec`` for a stale lease to expire.
    lease_ttl_sec: PositiveInt = 30
    lease_wait_sec: PositiveInt = 45
    stop_poll_interval_sec: PositiveInt = 2
    graceful_stop_timeout_sec: PositiveInt = 300

    @model_validator(mode="after")
    def _lower_bounds(self) -> Self:
        """The settings that may not be below another one, checked in this order."""
        at_least(
            "dedup_horizon_hours",
            self.dedup_horizon_hours,
            self.stream_retention_hours,
            f"the stream's retention ({self.stream_retention_hours} h): the "
            "de-duplication watermark runs on arrival time, and a shorter horizon "
            "would silently drop readable records of a shard that is behind",
        )
        at_least(
            "lease_wait_sec",
            self.lease_wait_sec,
            self.lease_ttl_sec,
            f"lease_ttl_sec ({self.lease_ttl_sec}), or a restart after a crash "
            "could never outwait the dead copy's lease",
        )
        return self

    @property
    def failure_store_uri(self) -> str:
        """Where claim-checked originals go: ``failure_store_location``, else
        ``_failures/`` beside the lease inside the checkpoint location."""
        if self.failure_store_location is not None:
            return self.failure_store_location
        return f"{self.checkpoint_location.rstrip('/')}/_failures/"

    @property
    def source_ends_uri(self) -> str:
        """Where the ``python-kinesis`` reading tasks record each batch's end
        per shard (``kinesis.metadataPath``): ``_kinesis_ends/`` inside the
        checkpoint location, so it lives and dies with the checkpoint."""
        return f"{self.checkpoint_location.rstrip('/')}/{KINESIS_ENDS_DIR}/"

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: object) -> JobConfig:
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise _config_error(exc, cls) from exc

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
