"""The table's layout (:mod:`model.table_layout`) in pyiceberg's terms: its
schema and its partition spec.

pyiceberg is imported inside the functions: :mod:`model.table_layout` stays
import-light for :mod:`infra`, and this module is what translates it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyiceberg import types
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import parse_transform
from pyiceberg.types import NestedField

from model.config import EventField
from model.record import ColumnType
from model.table_layout import Partitioning, TimeTransform, table_columns

# Iceberg's partition field ids start here (pyiceberg's PARTITION_FIELD_ID_START).
FIRST_PARTITION_FIELD_ID = 1000


def iceberg_type(kind: ColumnType) -> Any:
    return {
        "string": types.StringType(),
        "int": types.IntegerType(),
        "long": types.LongType(),
        "float": types.FloatType(),
        "double": types.DoubleType(),
        "boolean": types.BooleanType(),
        "timestamp": types.TimestampType(),
    }[kind]


def iceberg_transform(kind: TimeTransform) -> Any:
    """pyiceberg's transform of that name (``"day"`` -> ``DayTransform()``)."""
    return parse_transform(kind)


def iceberg_schema(fields: Sequence[EventField]) -> Schema:
    """The table's schema: every column optional (a missing optional event
    field is a null, and Spark's Arrow batches are nullable throughout)."""
    return Schema(
        *(
            NestedField(field_id=i, name=col.name, field_type=iceberg_type(col.type))
            for i, col in enumerate(table_columns(fields), start=1)
        )
    )


def partition_spec(schema: Schema, partitioning: Partitioning) -> PartitionSpec:
    """The spec a new table is created with."""
    source = schema.find_field(partitioning.source_column)
    return PartitionSpec(
        PartitionField(
            source_id=source.field_id,
            field_id=FIRST_PARTITION_FIELD_ID,
            transform=iceberg_transform(partitioning.transform),
            name=partitioning.field_name,
        )
    )
