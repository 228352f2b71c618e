"""The events table's columns and partitioning, from the event-field contract.

One source for everything that must agree on the table: the job writes these
columns and checks an existing table against them at start, and the stack
declares the same columns in the Glue table it creates. Import-light on
purpose (no Spark, no pyiceberg): :mod:`infra` imports it at synth.

The table is an Apache Iceberg table partitioned by :func:`partitioning`, today
``day(<event time>)`` (hidden partitioning: readers filter on the event time
column itself, and the day is derived by the table format, never stored as a
column of its own). That function is the one place the partitioning is chosen:
the pyiceberg spec (:func:`job.table.schema.partition_spec`), the spec a new or
still-empty table gets and the start-up check (:mod:`job.table.catalog`,
:mod:`job.table.checks`) all derive from the :class:`Partitioning` it returns.
Timestamps are Iceberg ``timestamp`` (microseconds, no zone) holding UTC
instants: the type Glue and Athena declare for a ``timestamp`` column of an
Iceberg table, so the Glue table the stack creates and the table the job
checks agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from model.config import EventField
from model.record import (
    EVOLVED_COLUMNS,
    GLUE_TYPES,
    SEED_COLUMNS,
    ColumnType,
    column_name,
    field_columns,
)

# Iceberg's type promotions between the table's column types (the spec's
# "Schema Evolution", https://iceberg.apache.org/spec/#schema-evolution; decimal
# widening is not listed: the table has no decimal column). The column type
# names are Iceberg's own, so synth (infra.schema_change) and the job's
# evolution at start (job.table.evolution) read the same pairs.
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


def event_columns(fields: Sequence[EventField]) -> tuple[TableColumn, ...]:
    """The parsed event's columns, in schema order."""
    return tuple(
        TableColumn(name, column_type)
        for spec in fields
        for name, column_type in field_columns(spec.name, spec.type)
    )


# The columns after the event's: where each row came from (the source's
# coordinates, named as :data:`model.record.COORDINATES` says) and which
# micro-batch wrote it. Columns added after the first tables were created
# (:data:`model.record.EVOLVED_COLUMNS`) reach a table the stack created before
# them from the job at start (:mod:`job.table.evolution`), appended after the
# others, which is also where a new table has them. The stack's
# CloudFormation definition stays the creation-time seed (:func:`seed_columns`):
# changing it would make CloudFormation rewrite every live table
# (docs/infra.md, "The events table").
def seed_columns(fields: Sequence[EventField]) -> tuple[TableColumn, ...]:
    """The columns a table is created with by the stack (its CloudFormation
    definition, fixed once deployed): every column but the evolved ones."""
    return (*event_columns(fields), *(TableColumn(n, t) for n, t in SEED_COLUMNS))


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


# Iceberg's own streaming sink puts these in each snapshot's summary; readers
# (``make status``, the benchmarks) and audits use them to find which batch made a snapshot.
QUERY_ID_SUMMARY: Final = "spark.sql.streaming.queryId"
BATCH_ID_SUMMARY: Final = "spark.sql.streaming.epochId"
