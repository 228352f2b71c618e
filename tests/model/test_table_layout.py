"""The table's layout module: one partition description, and light enough for
``cdk synth`` (infra/constructs/events_table.py imports it)."""

from __future__ import annotations

import json

from model.table_layout import Partitioning, partitioning
from tests.child_process import probe

HEAVY = ("pyspark", "pyiceberg", "pyarrow", "py4j")


def test_the_partition_description_names_transform_column_and_field() -> None:
    wanted = partitioning("occurredAt")
    assert wanted == Partitioning("day", "occurred_at", "occurred_at_day")
    assert str(wanted) == "day(occurred_at)"


def _heavy_modules_after(statements: str) -> list[str]:
    """Spark, pyiceberg or Arrow modules loaded by ``statements`` in a fresh interpreter."""
    code = (
        "import json, sys\n"
        "from model.config import DEFAULT_EVENT_FIELDS\n"
        f"{statements}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))\n"
    )
    return list(json.loads(probe(code)))


def test_the_layout_and_the_seed_columns_import_neither_spark_nor_pyiceberg() -> None:
    """What infra imports at synth; the control shows the probe sees pyiceberg."""
    light = (
        "from model.table_layout import partitioning, seed_columns\n"
        "seed_columns(DEFAULT_EVENT_FIELDS); partitioning('occurredAt')"
    )
    assert _heavy_modules_after(light) == []
    heavy = "from job.table.schema import iceberg_schema\niceberg_schema(DEFAULT_EVENT_FIELDS)"
    assert "pyiceberg" in _heavy_modules_after(heavy)
