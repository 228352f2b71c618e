"""Read the events table from outside the job.

The local metastore is embedded Derby: one JVM at a time. While the job runs it
owns the metastore, so progress comes from the table's Parquet files (pyarrow,
no JVM): a cheap, slightly optimistic view (a file can be visible a moment
before its partition is registered). The final verdict reads the table through
the Hive catalog in a Spark session of its own, started after the job has
stopped and released Derby: what a user's ``SELECT`` would return.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

# Spark's file index skips every path component starting with one of these
# (Hadoop's hidden-file rule), which is what keeps the job's staging
# directories (app.sinks.table.STAGING_PREFIXES) out of a read; a test checks
# that it covers them.
HIDDEN_PREFIXES: Final = (".", "_")


def data_files(location: Path) -> list[Path]:
    """Committed Parquet files under a table location (staging dirs excluded)."""
    if not location.exists():
        return []
    found: list[Path] = []
    for path in location.rglob("*.parquet"):
        parts = path.relative_to(location).parts
        if any(part.startswith(HIDDEN_PREFIXES) for part in parts):
            continue
        found.append(path)
    return sorted(found)


def ids_in_files(location: Path, column: str) -> list[str]:
    """Every id (``column``) in the table's files; a file removed while reading is skipped."""
    import pyarrow.parquet as pq

    ids: list[str] = []
    for path in data_files(location):
        try:
            table = pq.read_table(path, columns=[column])
        except (FileNotFoundError, OSError):
            continue
        ids.extend(str(v) for v in table.column(column).to_pylist())
    return ids


def read_table_with_spark(
    *,
    work_dir: Path,
    table: str,
    columns: Sequence[str],
    env: dict[str, str],
    out: Path,
    timeout: float = 180.0,
) -> list[dict[str, Any]]:
    """Rows of ``table`` via a fresh Spark session on the run's metastore.

    Runs in a child process (its own JVM) so the caller never holds Derby.
    """
    command = [
        sys.executable,
        "-m",
        "local.read_table",
        "--work-dir",
        str(work_dir),
        "--table",
        table,
        "--columns",
        ",".join(columns),
        "--out",
        str(out),
    ]
    completed = subprocess.run(command, env=env, capture_output=True, timeout=timeout, check=False)
    if completed.returncode != 0:
        tail = completed.stderr.decode(errors="replace")[-3000:]
        raise RuntimeError(f"reading {table} failed (exit {completed.returncode}):\n{tail}")
    rows: list[dict[str, Any]] = json.loads(out.read_text(encoding="utf-8"))
    return rows
