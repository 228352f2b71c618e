"""scripts.status.table: the table's last snapshot, on a SQLite catalog."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from local.table import sql_catalog
from scripts.status.table import snapshot_figures

# ------------------------------------------------------------------ table


def test_the_last_snapshot_names_its_batch(tmp_path: Path) -> None:
    catalog = SqlCatalog("t", **sql_catalog(tmp_path))
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", schema=pa.schema([("id", pa.string())]))
    assert snapshot_figures("db.events", table.current_snapshot(), 0).snapshot_id is None
    for batch, n in ((4, 3), (5, 2)):
        rows = pa.table({"id": [f"{batch}-{i}" for i in range(n)]})
        table.append(
            rows,
            snapshot_properties={
                "spark.sql.streaming.queryId": "q",
                "spark.sql.streaming.epochId": str(batch),
            },
        )
    figures = snapshot_figures("db.events", table.current_snapshot(), len(table.snapshots()))
    assert (figures.batch_id, figures.query_id, figures.operation) == (5, "q", "append")
    assert (figures.added_records, figures.total_records, figures.snapshots) == (2, 5, 2)
    assert figures.snapshot_id == table.current_snapshot().snapshot_id  # type: ignore[union-attr]
