"""The events table's columns and partitioning, from the event-field contract.

One source for everything that must agree on the table: the job writes these
columns and checks an existing table against them at start, and the stack
declares the same columns in the Glue table it creates. Import-light on
purpose (no Spark, no pyiceberg): :mod:`infra` imports it at synth.

The table is an Apache Iceberg table partitioned by :func:`partitioning`, today
``day(<event time>)`` (hidden partitioning: readers filter on the event time
column itself, and the day is derived by the table format, never stored as a
column of its own). That function is the one place the partitioning is chosen:
the pyiceberg spec (:func:`app.table.schema.partition_spec`), the spec a new or
still-empty table gets and the start-up check (:mod:`app.table.catalog`,
:mod:`app.table.checks`) all derive from the :class:`Partitioning` it returns.
Timestamps are Iceberg ``timestamp`` (microseconds, no zone) holding UTC
instants: the type Glue and Athena declare for a ``timestamp`` column of an
Iceberg table, so the Glue table the stack creates and the table the job
checks agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from app.config import EventField

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

# Glue column types of an Iceberg table (Athena's names for the same types).
GLUE_TYPES: Final[dict[ColumnType, str]] = {
    "string": "string",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "timestamp": "timestamp",
}

# Where each row came from (the source's coordinates) and which micro-batch
# wrote it; :mod:`app.transform` fills them from the source columns.
STREAM_NAME: Final = "stream_name"
SHARD_ID: Final = "shard_id"
SEQUENCE_NUMBER: Final = "sequence_number"
PARTITION_KEY: Final = "partition_key"
ARRIVAL_TIME: Final = "arrival_time"
BATCH_ID: Final = "batch_id"
SOURCE_COLUMNS: Final[tuple[tuple[str, ColumnType], ...]] = (
    (STREAM_NAME, "string"),
    (SHARD_ID, "string"),
    (SEQUENCE_NUMBER, "string"),
    (PARTITION_KEY, "string"),
    (ARRIVAL_TIME, "timestamp"),
    (BATCH_ID, "long"),
)

# Columns added after the first tables were created, in the order they were
# added: a table the stack created before them gets them from the job at start
# (:mod:`app.table.evolution`), appended after the others, which is also where
# a new table has them. The stack's CloudFormation definition stays the
# creation-time seed (:func:`seed_columns`): changing it would make
# CloudFormation rewrite every live table (docs/infra.md, "The events table").
#
# ``sub_sequence_number``: the index of a user record in its KPL aggregate
# (null for a plain record); with the sequence number it makes each row's
# source coordinates unique (app.sources.schema).
SUB_SEQUENCE_NUMBER: Final = "sub_sequence_number"
# ``undeclared_fields``: the keys of a valid event that ``job.event_fields``
# does not declare, as one compact JSON object (null when there are none), so
# no field a producer sends is dropped unseen (docs/infra.md, "Event schema").
UNDECLARED_FIELDS: Final = "undeclared_fields"
EVOLVED_COLUMNS: Final[tuple[tuple[str, ColumnType], ...]] = (
    (SUB_SEQUENCE_NUMBER, "long"),
    (UNDECLARED_FIELDS, "string"),
)

# Iceberg's type promotions between the table's column types (the spec's
# "Schema Evolution", https://iceberg.apache.org/spec/#schema-evolution; decimal
# widening is not listed: the table has no decimal column). The column type
# names are Iceberg's own, so synth (infra.schema_change) and the job's
# evolution at start (app.table.evolution) read the same pairs.
TYPE_PROMOTIONS: Final = frozenset({("int", "long"), ("float", "double")})

# Iceberg's time transforms, by the names Iceberg prints them with.
TimeTransform = Literal["year", "month", "day", "hour"]


@dataclass(frozen=True)
class TableColumn:
    name: str
    type: ColumnType

    @property
    def glue_type(self) -> str:
        return GLUE_TYPES[self.type]


def column_name(field_name: str) -> str:
    """The table column of a JSON field: ``occurredAt`` -> ``occurred_at``
    (Glue and Hive lower-case names, so camelCase would not survive)."""
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", field_name).lower()
    return re.sub(r"[^a-z0-9_]", "_", snake)


def raw_column_name(field_name: str) -> str:
    """Timestamp fields also keep the string as sent (nanoseconds, offset)."""
    return f"{column_name(field_name)}_raw"


def event_columns(fields: Sequence[EventField]) -> tuple[TableColumn, ...]:
    """The parsed event's columns, in schema order."""
    out: list[TableColumn] = []
    for spec in fields:
        out.append(TableColumn(column_name(spec.name), FIELD_COLUMN_TYPES[spec.type]))
        if spec.type == "timestamp":
            out.append(TableColumn(raw_column_name(spec.name), "string"))
    return tuple(out)


def seed_columns(fields: Sequence[EventField]) -> tuple[TableColumn, ...]:
    """The columns a table is created with by the stack (its CloudFormation
    definition, fixed once deployed): every column but the evolved ones."""
    return (*event_columns(fields), *(TableColumn(n, t) for n, t in SOURCE_COLUMNS))


def evolved_columns() -> tuple[TableColumn, ...]:
    """The columns the job adds to an older table (:data:`EVOLVED_COLUMNS`)."""
    return tuple(TableColumn(n, t) for n, t in EVOLVED_COLUMNS)


def table_columns(fields: Sequence[EventField]) -> tuple[TableColumn, ...]:
    """Every column of the events table, in order."""
    return (*seed_columns(fields), *evolved_columns())


@dataclass(frozen=True)
class Partitioning:
    """The table's one partition field: ``transform(source_column)``, named
    ``field_name`` in the table's partition spec."""

    transform: TimeTransform
    source_column: str
    field_name: str

    def __str__(self) -> str:
        return f"{self.transform}({self.source_column})"


def partitioning(event_time_field: str) -> Partitioning:
    """How the events table is partitioned: by the UTC day of the event time,
    in a field named as Iceberg names it by default (``<column>_<transform>``)."""
    transform: TimeTransform = "day"
    column = column_name(event_time_field)
    return Partitioning(transform, column, f"{column}_{transform}")
