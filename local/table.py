"""Read the events table from outside the job, through its catalog.

The local catalog is pyiceberg's ``SqlCatalog`` on a SQLite file: any number of
readers, also while the job commits, each seeing whole snapshots only (what a
user's query engine would see). ``python -m local.maintain`` also lives on
these helpers: it deletes the orphan files a crashed attempt left behind.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from job.table.catalog import load_table, open_catalog
from model.config import JobConfig

if TYPE_CHECKING:
    from pyiceberg.table import Table


def sql_catalog(root: Path | str, warehouse: str = "warehouse") -> dict[str, str]:
    """The ``catalog`` config of a local run: SQLite beside its warehouse under ``root``."""
    return {
        "type": "sql",
        "uri": f"sqlite:///{Path(root) / 'catalog.db'}",
        "warehouse": f"file://{Path(root) / warehouse}",
    }


@dataclass(frozen=True)
class TableFigures:
    """What the summary shows of the table itself."""

    snapshots: int
    data_files: int
    rows: int


def table_exists(config: JobConfig) -> bool:
    catalog = open_catalog(config)
    return bool(catalog.table_exists((config.database, config.table)))


def read_rows(config: JobConfig, columns: Sequence[str]) -> list[dict[str, Any]]:
    """Rows of the current snapshot (none before the first commit)."""
    if not table_exists(config):
        return []
    table = load_table(config)
    rows: list[dict[str, Any]] = table.scan(selected_fields=tuple(columns)).to_arrow().to_pylist()
    return rows


def figures(config: JobConfig) -> TableFigures:
    if not table_exists(config):
        return TableFigures(0, 0, 0)
    table = load_table(config)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return TableFigures(0, 0, 0)
    files = table.inspect.files()
    return TableFigures(
        snapshots=len(table.snapshots()),
        data_files=files.num_rows,
        rows=sum(files.column("record_count").to_pylist()),
    )


def referenced_files(table: Table) -> set[str]:
    """Every data file, manifest, manifest list and metadata file the table's
    metadata still reaches (all snapshots, not only the current one)."""
    paths: set[str] = set()
    paths.update(str(p) for p in table.inspect.all_files().column("file_path").to_pylist())
    paths.update(str(p) for p in table.inspect.all_manifests().column("path").to_pylist())
    for snapshot in table.snapshots():
        if snapshot.manifest_list:
            paths.add(snapshot.manifest_list)
    paths.add(table.metadata_location)
    paths.update(entry.metadata_file for entry in table.metadata.metadata_log)
    return {_local_path(p) for p in paths}


def _local_path(location: str) -> str:
    return str(Path(location.removeprefix("file://").removeprefix("file:")).resolve())


def orphan_files(table: Table, older_than: timedelta, now: float | None = None) -> list[Path]:
    """Files under the table's location that its metadata no longer reaches,
    older than ``older_than`` (a younger one may belong to a commit in flight)."""
    root = Path(_local_path(table.location()))
    if not root.exists():
        return []
    cutoff = (now if now is not None else time.time()) - older_than.total_seconds()
    keep = referenced_files(table)
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and str(p.resolve()) not in keep and p.stat().st_mtime < cutoff
    )


def delete_orphans(config: JobConfig, older_than: timedelta) -> list[Path]:
    """The local stand-in for the Glue orphan-file optimizer."""
    table = load_table(config)
    found = orphan_files(table, older_than)
    for path in found:
        path.unlink(missing_ok=True)
    return found
