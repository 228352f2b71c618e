"""A record's vocabulary: every name a Kinesis record goes by, in one table.

A record crosses three naming worlds on its way through the job: the source
rows (camelCase, as the awslabs connector names its columns), the events
table (snake_case: Glue and Hive lower-case names) and the failure topic's
Kafka headers. Each source coordinate is one row of :data:`COORDINATES` with
its name in all three, so a reader, the table, the task that splits a batch
and the failure producer all read the same row instead of renaming from one
world to the next. The failure taxonomy (each reason with the error class a
consumer sees) and the type maps live here too: the classification, the
dashboard, the reprocess command and the configuration's reserved names read
them.

Why a module of its own, and why this name: it is the one place a new
coordinate, column or failure reason is declared, and it must stay
import-light (no pyspark, no pyiceberg, nothing of the project's): ``cdk
synth`` and the operator commands import it (tests/test_light_imports.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

# ------------------------------------------------------------------- types

ColumnType = Literal["string", "int", "long", "float", "double", "boolean", "timestamp"]

# Event field type -> table column type. Objects and arrays are kept as their
# JSON text: the table's schema must not change with a payload's shape.
FIELD_COLUMN_TYPES: Final[dict[str, ColumnType]] = {
    "string": "string",
    "int": "int",
    "long": "long",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "timestamp": "timestamp",
    "object": "string",
    "array": "string",
}

# The field types kept as their JSON text (compact, as ``to_json`` prints them).
JSON_TEXT_TYPES: Final = ("object", "array")

# The SQL type names of the table's column types: Glue's for an Iceberg
# table's columns (Athena's names for the same types), and Spark SQL's for an
# event field's parsed value (``try_variant_get``): the same words.
GLUE_TYPES: Final[dict[ColumnType, str]] = {
    "string": "string",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "timestamp": "timestamp",
}
SPARK_TYPES: Final[dict[str, str]] = {name: sql for name, sql in GLUE_TYPES.items()}

# ------------------------------------------------------------- coordinates


@dataclass(frozen=True)
class Coordinate:
    """Where a record sits in the stream, by its name in each world.

    ``source``: the column of the source rows (:mod:`job.sources.schema`);
    ``column``: the events table's column; ``header``: the failure record's
    Kafka header; ``type``: the table column's type (the source column's
    Spark type is the same: string, long or timestamp)."""

    source: str
    column: str
    header: str
    type: ColumnType


STREAM: Final = Coordinate("streamName", "stream_name", "stream", "string")
SHARD: Final = Coordinate("shardId", "shard_id", "shard", "string")
SEQUENCE: Final = Coordinate("sequenceNumber", "sequence_number", "sequence_number", "string")
PARTITION_KEY: Final = Coordinate("partitionKey", "partition_key", "partition_key", "string")
ARRIVAL: Final = Coordinate(
    "approximateArrivalTimestamp", "arrival_time", "arrival_time", "timestamp"
)
# The index of a user record in its KPL aggregate (null for a plain record);
# with the sequence number it makes each row's coordinates unique.
SUB_SEQUENCE: Final = Coordinate(
    "subSequenceNumber", "sub_sequence_number", "sub_sequence_number", "long"
)

# Every coordinate, in the table's column order (the sub-sequence number came
# later: see :data:`EVOLVED_COLUMNS`).
COORDINATES: Final = (STREAM, SHARD, SEQUENCE, PARTITION_KEY, ARRIVAL, SUB_SEQUENCE)

# The record's bytes: ``data`` in the source rows; a failure record's value.
DATA: Final = "data"

# The awslabs connector's five columns, in its order (README "Check Schema");
# every source adds the shard and the sub-sequence number after them.
CONNECTOR_COLUMNS: Final = (
    DATA,
    STREAM.source,
    PARTITION_KEY.source,
    SEQUENCE.source,
    ARRIVAL.source,
)
SOURCE_COLUMNS: Final = (*CONNECTOR_COLUMNS, SHARD.source, SUB_SEQUENCE.source)

# ----------------------------------------------------------- table columns

# Which micro-batch wrote a row (not a coordinate: the job stamps it).
BATCH_ID: Final = "batch_id"
# The keys of a valid event that ``job.event_fields`` does not declare, as
# one compact JSON object (null when there are none), so no field a producer
# sends is dropped unseen (docs/infra.md, "Event schema").
UNDECLARED_FIELDS: Final = "undeclared_fields"

# The table's columns after the event's, as the stack creates them.
SEED_COLUMNS: Final[tuple[tuple[str, ColumnType], ...]] = (
    *((c.column, c.type) for c in COORDINATES if c is not SUB_SEQUENCE),
    (BATCH_ID, "long"),
)
# Columns added after the first tables were created, in the order they were
# added: a table the stack created before them gets them from the job at
# start (:mod:`job.table.evolution`), appended after the others.
EVOLVED_COLUMNS: Final[tuple[tuple[str, ColumnType], ...]] = (
    (SUB_SEQUENCE.column, SUB_SEQUENCE.type),
    (UNDECLARED_FIELDS, "string"),
)


def column_name(field_name: str) -> str:
    """The table column of a JSON field: ``occurredAt`` -> ``occurred_at``
    (Glue and Hive lower-case names, so camelCase would not survive)."""
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", field_name).lower()
    return re.sub(r"[^a-z0-9_]", "_", snake)


def raw_column_name(field_name: str) -> str:
    """Timestamp fields also keep the string as sent (nanoseconds, offset)."""
    return f"{column_name(field_name)}_raw"


def field_columns(name: str, field_type: str) -> tuple[tuple[str, ColumnType], ...]:
    """The table columns of one event field, with their types: its value's,
    and for a timestamp the text as sent beside it."""
    value: tuple[str, ColumnType] = (column_name(name), FIELD_COLUMN_TYPES[field_type])
    if field_type == "timestamp":
        return (value, (raw_column_name(name), "string"))
    return (value,)


# --------------------------------------------------------- failure taxonomy


@dataclass(frozen=True)
class Reason:
    """A failure reason (the ``reason`` header, the metric's dimension) and
    the class of error a hand-written parser would have raised for it (the
    ``exception`` header)."""

    name: str
    error_class: str


TOO_LARGE: Final = "too_large"
BAD_AGGREGATE: Final = "bad_aggregate"
NOT_UTF8: Final = "not_utf8"
MALFORMED_JSON: Final = "malformed_json"
TRAILING_DATA: Final = "trailing_data"
MISSING_FIELD: Final = "missing_field"
WRONG_TYPE: Final = "wrong_type"
BAD_TIMESTAMP: Final = "bad_timestamp"

# Every reason, in precedence order: the first that applies to a record wins
# (job.transform's module docstring says when each applies; its ``judge``
# step tests them in this order).
TAXONOMY: Final = (
    Reason(TOO_LARGE, "RecordTooLargeError"),
    Reason(BAD_AGGREGATE, "AggregateDecodeError"),
    Reason(NOT_UTF8, "UnicodeDecodeError"),
    Reason(MALFORMED_JSON, "JSONDecodeError"),
    Reason(TRAILING_DATA, "TrailingDataError"),
    Reason(MISSING_FIELD, "MissingFieldError"),
    Reason(WRONG_TYPE, "TypeError"),
    Reason(BAD_TIMESTAMP, "DateTimeParseError"),
)
ERROR_CLASSES: Final = {r.name: r.error_class for r in TAXONOMY}
REASONS: Final = tuple(ERROR_CLASSES)

# The columns the classification adds to the source columns; the failure
# record's headers that carry them.
REASON: Final = "failure_reason"
MESSAGE: Final = "failure_message"
ERROR_CLASS: Final = "failure_class"
# The keys of a record's object that no event field declares (null when
# none), counted per name by each task (job.sinks.batch_task); never a table column.
UNDECLARED_KEYS: Final = "undeclared_keys"
CLASSIFICATION_COLUMNS: Final = (REASON, MESSAGE, ERROR_CLASS, UNDECLARED_KEYS)

# Header names on every failure record (consumers and the reprocess command
# read them); the coordinates' headers are in :data:`COORDINATES`.
REASON_HEADER: Final = "reason"
EXCEPTION_HEADER: Final = "exception"
MESSAGE_HEADER: Final = "message"
INSTANCE_HEADER: Final = "instance"
ARRIVAL_HEADER: Final = ARRIVAL.header
