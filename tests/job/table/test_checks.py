"""The start-up checks of an existing table, as the lines the job stops with
(job.table.checks): columns against the contract, the partition spec against
the layout's, and the pyiceberg steps that re-partition a table in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, HourTransform
from pyiceberg.types import LongType, NestedField, StringType

from job.table.checks import repartition_steps, schema_problems, spec_problems
from job.table.schema import iceberg_schema
from model.config import DEFAULT_EVENT_FIELDS
from model.table_layout import partitioning

WANTED = partitioning("occurredAt")


@dataclass
class _Table:
    """What the checks read of a pyiceberg table: its schema and its spec."""

    table_schema: Schema
    table_spec: PartitionSpec

    def schema(self) -> Schema:
        return self.table_schema

    def spec(self) -> PartitionSpec:
        return self.table_spec


def _contract() -> Schema:
    return iceberg_schema(DEFAULT_EVENT_FIELDS)


def _spec(schema: Schema, *fields: tuple[str, Any, str]) -> PartitionSpec:
    return PartitionSpec(
        *(
            PartitionField(schema.find_field(column).field_id, 1000 + i, transform, name)
            for i, (column, transform, name) in enumerate(fields)
        )
    )


def test_the_contracts_own_schema_has_no_problem() -> None:
    assert schema_problems("db.events", _contract(), DEFAULT_EVENT_FIELDS) == []


def test_a_missing_a_retyped_and_an_extra_column_are_each_one_line() -> None:
    kept = [f for f in _contract().fields if f.name not in ("payload", "batch_id")]
    found = Schema(
        *kept,
        NestedField(900, "batch_id", StringType(), required=False),
        NestedField(901, "extra", LongType(), required=False),
    )
    lines = schema_problems("db.events", found, DEFAULT_EVENT_FIELDS)
    assert sorted(lines) == sorted(
        [
            "table db.events: column 'payload' is missing; expected string",
            "table db.events: column 'batch_id' is string; expected long",
            "table db.events: column 'extra' (long) is not an event column; expected only "
            + ", ".join(f.name for f in _contract().fields),
        ]
    )


def test_the_expected_partitioning_alone_has_no_problem() -> None:
    schema = _contract()
    table = _Table(schema, _spec(schema, ("occurred_at", DayTransform(), "occurred_at_day")))
    assert spec_problems("db.events", table, WANTED) == []


def test_another_partitioning_is_refused_with_the_steps_that_fix_it() -> None:
    schema = _contract()
    table = _Table(schema, _spec(schema, ("occurred_at", HourTransform(), "occurred_at_hour")))
    assert repartition_steps(table, WANTED) == [
        "from pyiceberg.transforms import DayTransform",
        "with table.update_spec() as spec:",
        '    spec.remove_field("occurred_at_hour")',
        '    spec.add_field("occurred_at", DayTransform(), "occurred_at_day")',
    ]
    (line,) = spec_problems("db.events", table, WANTED)
    assert line.startswith(
        "table db.events: partitioned by [hour(occurred_at)]; expected [day(occurred_at)]"
    )
    assert '       spec.remove_field("occurred_at_hour")' in line
    assert 'load_table("db.events")' in line


def test_an_extra_field_beside_the_expected_one_is_removed_and_the_day_kept() -> None:
    schema = _contract()
    spec = _spec(
        schema,
        ("occurred_at", DayTransform(), "occurred_at_day"),
        ("occurred_at", HourTransform(), "occurred_at_hour"),
    )
    table = _Table(schema, spec)
    assert repartition_steps(table, WANTED)[2:] == ['    spec.remove_field("occurred_at_hour")']
    assert len(spec_problems("db.events", table, WANTED)) == 1
