"""The Iceberg sink without Spark: the table check at start, the exactly-once
commit, bounded retries, snapshot expiry and the local upkeep command.

Data files are written with the same function the executors run
(:func:`app.sinks.iceberg_files.write_data_files`), from Arrow batches shaped
like Spark's (timestamps with the UTC zone)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from app.config import ConfigError, JobConfig, TableMaintenance
from app.sinks.iceberg_catalog import (
    COMMITTED_PROPERTY,
    ensure_table,
    file_io_properties,
    iceberg_schema,
    open_catalog,
    with_retries,
)
from app.sinks.iceberg_commit import commit_batch, expirable_snapshots
from app.sinks.iceberg_files import write_data_files
from app.table_layout import table_columns
from tests.app.job_helpers import job_config, local_catalog

DAY = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _config(root: Path, **overrides: Any) -> JobConfig:
    return job_config(
        database="sink",
        bootstrap="127.0.0.1:1",
        **{"catalog": local_catalog(str(root)), **overrides},
    )


def _batch(ids: list[str], batch_id: int, day: datetime = DAY) -> pa.RecordBatch:
    """Rows as Spark's Arrow batches carry them (timestamps zoned UTC)."""
    columns = {c.name: c.type for c in table_columns(_config_fields())}
    data: dict[str, list[Any]] = {name: [] for name in columns}
    for i, event_id in enumerate(ids):
        row = {
            "id": event_id, "type": "created", "occurred_at": day, "occurred_at_raw": "x",
            "payload": "{}", "stream_name": "s", "shard_id": "shard-0",
            "sequence_number": str(i), "partition_key": event_id, "arrival_time": day,
            "batch_id": batch_id, "sub_sequence_number": None,
        }  # fmt: skip
        for name in columns:
            data[name].append(row[name])
    arrow_types = {
        "string": pa.string(),
        "long": pa.int64(),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }
    schema = pa.schema([(n, arrow_types[t]) for n, t in columns.items()])
    return pa.RecordBatch.from_pydict(data, schema=schema)


def _config_fields() -> Any:
    from app.config import DEFAULT_EVENT_FIELDS

    return DEFAULT_EVENT_FIELDS


def _write(table: Any, config: JobConfig, ids: list[str], batch_id: int) -> list[Any]:
    return write_data_files(
        table.metadata.model_dump_json(), file_io_properties(config), [_batch(ids, batch_id)]
    )


def _ids(table: Any) -> list[str]:
    table.refresh()
    return sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


def test_a_batch_commits_once_and_its_replay_is_skipped(tmp_path: Path) -> None:
    config = _config(tmp_path)
    table = ensure_table(config)
    files = _write(table, config, ["a", "b"], 0)
    first = commit_batch(table, files, query_id="q", batch_id=0, options=config.catalog)
    again = commit_batch(table, files, query_id="q", batch_id=0, options=config.catalog)
    assert (first.committed, again.committed) == (True, False)
    assert _ids(table) == ["a", "b"]
    assert table.properties[COMMITTED_PROPERTY] == "q:0"
    assert len(table.snapshots()) == 1
    # An older batch id of the same query is a replay too; another query is not.
    assert not commit_batch(table, [], query_id="q", batch_id=0, options=config.catalog).committed
    other = commit_batch(
        table, _write(table, config, ["c"], 0), query_id="q2", batch_id=0, options=config.catalog
    )
    assert other.committed and _ids(table) == ["a", "b", "c"]


def test_the_day_partition_is_the_utc_day(tmp_path: Path) -> None:
    config = _config(tmp_path)
    table = ensure_table(config)
    late = datetime(2026, 1, 2, 23, 30, tzinfo=UTC)
    files = write_data_files(
        table.metadata.model_dump_json(),
        file_io_properties(config),
        [_batch(["a"], 0, late), _batch(["b"], 0, late + timedelta(hours=1))],
    )
    assert sorted(str(f.partition[0]) for f in files) == ["20455", "20456"]  # days since epoch


def test_a_table_with_another_schema_stops_the_job_naming_table_column_and_types(
    tmp_path: Path,
) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    config = _config(tmp_path)
    catalog = open_catalog(config)
    catalog.create_namespace(config.database)
    hand_made = Schema(
        NestedField(1, "id", LongType()),  # wrong type
        NestedField(2, "type", StringType()),
        NestedField(3, "note", StringType()),  # not an event column
    )
    catalog.create_table((config.database, config.table), schema=hand_made)
    with pytest.raises(ConfigError) as error:
        ensure_table(config)
    text = str(error.value)
    assert "table sink.events: column 'id' is long; expected string" in text
    assert "column 'occurred_at' is missing; expected timestamp" in text
    assert "column 'note' (string) is not an event column" in text


def test_an_empty_unpartitioned_table_gets_the_day_partition_and_properties(
    tmp_path: Path,
) -> None:
    """The stack's CloudFormation table arrives without a partition spec."""
    config = _config(tmp_path)
    catalog = open_catalog(config)
    catalog.create_namespace(config.database)
    catalog.create_table(
        (config.database, config.table), schema=iceberg_schema(config.event_fields)
    )
    table = ensure_table(config)
    assert [f.name for f in table.spec().fields] == ["occurred_at_day"]
    assert table.properties["commit.manifest-merge.enabled"] == "true"


def test_transient_catalog_errors_are_retried_a_bounded_number_of_times(tmp_path: Path) -> None:
    config = _config(tmp_path, catalog={**local_catalog(str(tmp_path)), "max_attempts": 3})
    calls: list[int] = []
    waits: list[float] = []

    def down() -> None:
        calls.append(1)
        raise ConnectionError("catalog unreachable")

    with pytest.raises(ConnectionError):
        with_retries(down, "load", config.catalog, sleep=waits.append)
    assert len(calls) == 3
    assert waits == [1.0, 2.0]

    def missing() -> None:
        calls.append(1)
        raise KeyError("not transient")

    calls.clear()
    with pytest.raises(KeyError):
        with_retries(missing, "load", config.catalog, sleep=waits.append)
    assert len(calls) == 1


def test_expiry_keeps_the_newest_snapshots_whatever_their_age(tmp_path: Path) -> None:
    from app.sinks.iceberg_commit import expire_snapshots

    config = _config(tmp_path)
    table = ensure_table(config)
    for batch in range(5):
        files = _write(table, config, [f"id-{batch}"], batch)
        commit_batch(table, files, query_id="q", batch_id=batch, options=config.catalog)
    keep_two = TableMaintenance(snapshots_to_retain=2)
    newest = [s.snapshot_id for s in sorted(table.snapshots(), key=lambda s: s.timestamp_ms)][-2:]
    assert len(expirable_snapshots(table, keep_two)) == 3
    assert expire_snapshots(table, keep_two) == 3
    table.refresh()
    assert sorted(s.snapshot_id for s in table.snapshots()) == sorted(newest)
    assert _ids(table) == [f"id-{b}" for b in range(5)], "expiry drops no row"


def test_make_maintain_deletes_orphans_and_keeps_the_table(tmp_path: Path) -> None:
    root = tmp_path / "run"
    config = _config(root / "orders")
    (root / "orders").mkdir(parents=True, exist_ok=True)
    (root / "orders" / "job.json").write_text(config.to_json(), encoding="utf-8")
    table = ensure_table(config)
    commit_batch(
        table, _write(table, config, ["a"], 0), query_id="q", batch_id=0, options=config.catalog
    )
    (orphan,) = _write(table, config, ["b"], 1)  # a killed attempt's file
    orphan_path = Path(orphan.file_path.removeprefix("file://"))
    old = time.time() - 7200
    os.utime(orphan_path, (old, old))

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "local.maintain",
            "--work-dir",
            str(root),
            "--orphan-age-hours",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "1 orphan files deleted" in done.stdout
    assert not orphan_path.exists()
    assert _ids(table) == ["a"]

    empty = subprocess.run(
        [sys.executable, "-m", "local.maintain", "--work-dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert empty.returncode == 2
    assert "no local run under" in empty.stdout
