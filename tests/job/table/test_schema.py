"""``job.table.schema``: the pyiceberg schema, partition spec and transforms
derived from the job's own table description."""

from __future__ import annotations

from typing import get_args

from job.table.schema import iceberg_schema, iceberg_transform, partition_spec
from model.config import DEFAULT_EVENT_FIELDS
from model.table_layout import TimeTransform, partitioning


def test_the_pyiceberg_spec_is_derived_from_the_description() -> None:
    schema = iceberg_schema(DEFAULT_EVENT_FIELDS)
    (field,) = partition_spec(schema, partitioning("occurredAt")).fields
    assert (field.name, str(field.transform)) == ("occurred_at_day", "day")
    assert schema.find_column_name(field.source_id) == "occurred_at"


def test_every_time_transform_reads_back_under_its_own_name() -> None:
    """The start-up check compares the table's transforms by these names."""
    kinds = get_args(TimeTransform)
    assert kinds == ("year", "month", "day", "hour")
    assert [str(iceberg_transform(kind)) for kind in kinds] == list(kinds)
