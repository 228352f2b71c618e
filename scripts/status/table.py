"""The events table's last snapshot, read through its catalog.

The same catalog the job commits to (:func:`job.table.catalog.open_catalog`:
Glue on AWS, the run's SQLite catalog locally), read once, without the job's
retries: a status is a look, not a batch. Each batch's snapshot carries the
streaming query and batch id in its summary (:mod:`job.table.commit`),
so the last snapshot says which batch last landed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from job.table.catalog import open_catalog
from model.config import JobConfig
from model.table_layout import BATCH_ID_SUMMARY, QUERY_ID_SUMMARY

SQLITE_PREFIX: Final = "sqlite:///"


@dataclass(frozen=True)
class SnapshotFigures:
    table: str
    snapshot_id: int | None  # None: the table has no snapshot yet
    at: datetime | None = None
    operation: str = ""
    batch_id: int | None = None
    query_id: str | None = None
    added_records: int | None = None
    added_files: int | None = None
    total_records: int | None = None
    total_files: int | None = None
    snapshots: int = 0


def _int(summary: Mapping[str, Any], key: str) -> int | None:
    value = summary.get(key)
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def snapshot_figures(name: str, snapshot: Any, snapshots: int) -> SnapshotFigures:
    """Figures of a pyiceberg snapshot (None: no snapshot). Pure."""
    if snapshot is None:
        return SnapshotFigures(name, None, snapshots=snapshots)
    summary = snapshot.summary
    props: Mapping[str, Any] = dict(summary.additional_properties) if summary is not None else {}
    operation = summary.operation.value if summary is not None else ""
    query = props.get(QUERY_ID_SUMMARY)
    return SnapshotFigures(
        table=name,
        snapshot_id=int(snapshot.snapshot_id),
        at=datetime.fromtimestamp(snapshot.timestamp_ms / 1000.0, UTC),
        operation=str(operation),
        batch_id=_int(props, BATCH_ID_SUMMARY),
        query_id=None if query is None else str(query),
        added_records=_int(props, "added-records"),
        added_files=_int(props, "added-data-files"),
        total_records=_int(props, "total-records"),
        total_files=_int(props, "total-data-files"),
        snapshots=snapshots,
    )


def read_snapshot(config: JobConfig) -> SnapshotFigures | None:
    """The table's last snapshot; None when the table does not exist yet."""
    name = f"{config.database}.{config.table}"
    uri = config.catalog.uri or ""
    sqlite = config.catalog.type == "sql" and uri.startswith(SQLITE_PREFIX)
    if sqlite and not Path(uri.removeprefix(SQLITE_PREFIX)).is_file():
        return None  # opening it would create an empty catalog file
    catalog = open_catalog(config)
    try:
        table = catalog.load_table((config.database, config.table))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None
    return snapshot_figures(name, table.current_snapshot(), len(table.snapshots()))
