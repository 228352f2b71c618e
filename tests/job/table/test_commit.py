"""The Iceberg sink without Spark: the table check at start, the exactly-once
commit, snapshot expiry and the local upkeep command.

Data files are written with the same function the executors run
(:func:`job.table.files.write_data_files`), from Arrow batches shaped
like Spark's (timestamps with the UTC zone)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import parse_transform
from pyiceberg.types import LongType, NestedField, StringType

from job.table.catalog import ensure_table, file_io_properties, open_catalog
from job.table.commit import COMMITTED_PROPERTY, commit_batch, expirable_snapshots, expire_snapshots
from job.table.files import write_data_files
from job.table.schema import iceberg_schema
from model.config import DEFAULT_EVENT_FIELDS, ConfigError, JobConfig, TableMaintenance
from model.table_layout import table_columns
from tests.job.job_helpers import job_config, local_catalog

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
            "batch_id": batch_id, "sub_sequence_number": None, "undeclared_fields": None,
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


class _CountedRefresh:
    """``table.refresh`` counted: each call is a GetTable and a metadata GET on AWS."""

    def __init__(self, table: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = table.refresh

        def refresh() -> Any:
            self.calls += 1
            return original()

        monkeypatch.setattr(table, "refresh", refresh)


def test_a_fresh_table_is_committed_without_reading_it_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path)
    table = ensure_table(config)
    counted = _CountedRefresh(table, monkeypatch)
    stale = commit_batch(
        table, _write(table, config, ["a"], 0), query_id="q", batch_id=0, options=config.catalog
    )
    fresh = commit_batch(
        table,
        _write(table, config, ["b"], 1),
        query_id="q",
        batch_id=1,
        options=config.catalog,
        fresh=True,
    )
    assert stale.committed and fresh.committed
    assert counted.calls == 1, "only the commit not told the table is fresh reads it"
    assert _ids(table) == ["a", "b"] and table.properties[COMMITTED_PROPERTY] == "q:1"


def test_a_commit_by_someone_else_since_the_refresh_is_kept_and_ours_lands(
    tmp_path: Path,
) -> None:
    """A Glue optimizer's commit between the batch's refresh and its commit:
    pyiceberg's optimistic check fails the first attempt, it refreshes and
    retries; neither commit is lost."""
    config = _config(tmp_path)
    table = ensure_table(config)
    files = _write(table, config, ["ours"], 0)
    optimizer = open_catalog(config).load_table((config.database, config.table))
    with optimizer.transaction() as tx, tx.update_snapshot().fast_append() as append:
        for data_file in _write(optimizer, config, ["theirs"], 7):
            append.append_data_file(data_file)
    found = commit_batch(table, files, query_id="q", batch_id=0, options=config.catalog, fresh=True)
    assert found.committed
    assert _ids(table) == ["ours", "theirs"]
    assert table.properties[COMMITTED_PROPERTY] == "q:0"


def test_a_fresh_commit_that_failed_on_the_network_reads_the_table_before_retrying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt's outcome is unknown after a dropped connection: the
    retry refreshes, and a batch that landed meanwhile is not committed twice."""
    config = _config(tmp_path)
    table = ensure_table(config)
    files = _write(table, config, ["a"], 0)
    transaction = table.transaction
    calls = []

    def landed_then_dropped() -> Any:
        calls.append(1)
        if len(calls) == 1:
            # another handle lands the batch, as the lost attempt would have
            commit_batch(
                open_catalog(config).load_table((config.database, config.table)),
                files,
                query_id="q",
                batch_id=0,
                options=config.catalog,
            )
            raise ConnectionError("connection reset after the commit was sent")
        return transaction()

    monkeypatch.setattr(table, "transaction", landed_then_dropped)
    counted = _CountedRefresh(table, monkeypatch)
    again = commit_batch(
        table,
        files,
        query_id="q",
        batch_id=0,
        options=config.catalog.model_copy(update={"retry_wait_sec": 0.001}),
        fresh=True,
    )
    assert not again.committed, "found landed on the refresh: not committed twice"
    assert counted.calls == 1 and len(calls) == 1
    assert _ids(table) == ["a"] and len(table.snapshots()) == 1


def _hand_made(config: JobConfig, schema: Any, spec: Any = None) -> Any:
    """A table someone else created in the job's place (no properties set)."""

    catalog = open_catalog(config)
    catalog.create_namespace(config.database)
    return catalog.create_table(
        (config.database, config.table),
        schema=schema,
        partition_spec=spec or UNPARTITIONED_PARTITION_SPEC,
    )


def test_a_table_with_another_schema_stops_the_job_naming_table_column_and_types(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    hand_made = Schema(
        NestedField(1, "id", LongType()),  # wrong type
        NestedField(2, "type", StringType()),
        NestedField(3, "note", StringType()),  # not an event column
    )
    _hand_made(config, hand_made)
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
    _hand_made(config, iceberg_schema(config.event_fields))
    table = ensure_table(config)
    assert [f.name for f in table.spec().fields] == ["occurred_at_day"]
    assert table.properties["commit.manifest-merge.enabled"] == "true"


def _spec(schema: Any, *fields: tuple[str, Any, str]) -> Any:
    return PartitionSpec(
        *(
            PartitionField(schema.find_field(column).field_id, 1000 + i, transform, name)
            for i, (column, transform, name) in enumerate(fields)
        )
    )


def _fix_from(message: str) -> str:
    """The pyiceberg statements of the refusal's step 2, as the operator would paste them."""
    block = message.split("  2. run:\n", 1)[1].split("\n  3. ", 1)[0]
    return "\n".join(line.removeprefix("       ") for line in block.splitlines())


@pytest.mark.parametrize(
    ("found", "shown", "removed"),
    [
        ([("occurred_at", "month", "occurred_at_month")], "month(occurred_at)", 1),
        (
            [("occurred_at", "day", "occurred_at_day"), ("shard_id", "identity", "shard_id")],
            "day(occurred_at), identity(shard_id)",
            1,
        ),
    ],
)
def test_a_table_partitioned_otherwise_is_refused_with_steps_that_fix_it(
    tmp_path: Path, found: list[tuple[str, str, str]], shown: str, removed: int
) -> None:
    """A table with rows under another spec: the job does not start, and the
    steps its message gives re-partition it in place, old rows kept."""

    config = _config(tmp_path)
    schema = iceberg_schema(config.event_fields)
    spec = _spec(schema, *((c, parse_transform(t), n) for c, t, n in found))
    old = _hand_made(config, schema, spec)
    old.append(pa.Table.from_batches([_batch(["old"], 0)]).cast(schema.as_arrow()))
    with pytest.raises(ConfigError) as error:
        ensure_table(config)
    message = str(error.value)
    assert f"table sink.events: partitioned by [{shown}]; expected [day(occurred_at)]" in message
    assert 'load_catalog("glue", type="glue").load_table("sink.events")' in message
    fix = _fix_from(message)
    assert fix.count("remove_field") == removed

    exec(fix, {"table": open_catalog(config).load_table(("sink", "events"))})

    table = ensure_table(config)
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("occurred_at_day", "day")]
    commit_batch(
        table, _write(table, config, ["new"], 1), query_id="q", batch_id=1, options=config.catalog
    )
    assert _ids(table) == ["new", "old"], "rows under the old spec stay readable"


def test_expiry_keeps_the_newest_snapshots_whatever_their_age(tmp_path: Path) -> None:
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
