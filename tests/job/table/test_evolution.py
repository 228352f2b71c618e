"""An events table gets at start the columns it lacks: the job's own added
since it was created, and event fields declared since."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import FloatType, IntegerType, NestedField, StringType

from job import query
from job.table import catalog as catalog_module
from job.table.catalog import ensure_table, open_catalog
from job.table.evolution import Evolution, evolve_table, plan_evolution
from job.table.files import write_data_files
from job.table.schema import iceberg_schema, partition_spec
from model.config import DEFAULT_EVENT_FIELDS, ConfigError, EventField, JobConfig
from model.record import SUB_SEQUENCE, UNDECLARED_FIELDS
from model.table_layout import (
    TYPE_PROMOTIONS,
    partitioning,
    seed_columns,
    table_columns,
)
from tests.job.job_helpers import job_config, local_catalog

DAY = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _config(root: Path) -> JobConfig:
    return job_config(database="evolve", bootstrap="127.0.0.1:1", catalog=local_catalog(str(root)))


def _old_table(config: JobConfig) -> Any:
    """The table as the stack and the job made it before the column existed,
    partitioned and holding one row."""

    full = iceberg_schema(config.event_fields)
    seed = {c.name for c in seed_columns(config.event_fields)}
    old = Schema(*(f for f in full.fields if f.name in seed))
    catalog = open_catalog(config)
    catalog.create_namespace(config.database)
    table = catalog.create_table(
        (config.database, config.table),
        schema=old,
        partition_spec=partition_spec(old, partitioning(config.event_time_field)),
    )
    row = {
        "id": "old", "type": "created", "occurred_at": DAY, "occurred_at_raw": "x",
        "payload": "{}", "stream_name": "s", "shard_id": "shard-0", "sequence_number": "1",
        "partition_key": "old", "arrival_time": DAY, "batch_id": 0,
    }  # fmt: skip
    table.append(pa.Table.from_pylist([row], schema=old.as_arrow()))
    return table


def test_the_job_adds_the_column_an_old_table_lacks_and_old_rows_read_null(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path)
    table = _old_table(config)
    evolved = [SUB_SEQUENCE.column, UNDECLARED_FIELDS]
    assert list(plan_evolution(table.schema(), config.event_fields).added) == evolved
    with pytest.raises(ConfigError, match="'sub_sequence_number' is missing"):
        ensure_table(config)  # what a job without the evolution step would do

    assert evolve_table(config) == Evolution(tuple(evolved), ())
    table = ensure_table(config)
    names = [f.name for f in table.schema().fields]
    assert names == [c.name for c in table_columns(config.event_fields)]
    assert names[-2:] == evolved, "appended after the others"
    rows = table.scan().to_arrow().to_pylist()
    assert [(r["id"], r[SUB_SEQUENCE.column], r[UNDECLARED_FIELDS]) for r in rows] == [
        ("old", None, None)
    ]
    assert evolve_table(config).empty, "once"


def test_a_declared_field_reaches_the_live_table_and_rows_are_written_by_name(
    tmp_path: Path,
) -> None:
    """The redeployed job declares ``channel``: the column is appended after
    the job's own (not where a new table would have it), earlier rows read
    null, and the job's data files, whose columns come in the contract's
    order, land in the right columns."""
    config = _config(tmp_path)
    table = ensure_table(config)  # today's table, every column of the old fields
    assert plan_evolution(table.schema(), config.event_fields).empty
    fields = (*DEFAULT_EVENT_FIELDS, EventField("channel", required=False))
    later = config.model_copy(update={"event_fields": fields})
    assert evolve_table(later) == Evolution(("channel",), ())
    table = ensure_table(later)
    assert [f.name for f in table.schema().fields][-1] == "channel"
    assert all(not f.required for f in table.schema().fields)

    row = {
        "id": "new", "type": "created", "occurred_at": DAY, "occurred_at_raw": "x",
        "payload": "{}", "channel": "web", "stream_name": "s", "shard_id": "shard-0",
        "sequence_number": "2", "partition_key": "new", "arrival_time": DAY, "batch_id": 1,
        SUB_SEQUENCE.column: None, UNDECLARED_FIELDS: None,
    }  # fmt: skip
    ordered = [c.name for c in table_columns(fields)]
    assert ordered.index("channel") < ordered.index("stream_name"), "contract order differs"
    # As Spark hands them over: no Iceberg field ids, matched by name.
    plain = pa.schema([(f.name, f.type) for f in iceberg_schema(fields).as_arrow()])
    batch = pa.RecordBatch.from_pylist([row], schema=plain)
    files = write_data_files(table.metadata.model_dump_json(), {}, [batch])
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        for data_file in files:
            append.append_data_file(data_file)
    got = table.scan().to_arrow().to_pylist()
    assert [(r["id"], r["channel"], r["sequence_number"]) for r in got] == [("new", "web", "2")]


def test_only_icebergs_promotions_are_made() -> None:
    fields = (EventField("id"), EventField("n", "long"), EventField("x", "double"))
    contract = iceberg_schema(fields)
    narrow = {"n": IntegerType(), "x": FloatType()}
    found = Schema(
        *(
            NestedField(f.field_id, f.name, narrow.get(f.name, f.field_type), required=False)
            for f in contract.fields
        )
    )
    plan = plan_evolution(found, fields)
    assert plan.promoted == (("n", "int", "long"), ("x", "float", "double"))
    assert plan.added == ()
    assert ("long", "int") not in TYPE_PROMOTIONS and ("double", "long") not in TYPE_PROMOTIONS
    other = Schema(NestedField(1, "id", StringType(), required=False))
    assert plan_evolution(other, fields).promoted == ()


def test_a_table_that_does_not_exist_yet_is_left_to_ensure_table(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert evolve_table(config).empty
    table = ensure_table(config)
    assert plan_evolution(table.schema(), config.event_fields).added == ()


def test_the_jobs_start_loads_the_table_once_evolves_and_checks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path)
    _old_table(config)
    loads: list[str] = []
    real_load = catalog_module.load_table

    def counting_load(*args: Any, **kwargs: Any) -> Any:
        loads.append("load")
        return real_load(*args, **kwargs)

    monkeypatch.setattr(catalog_module, "load_table", counting_load)
    monkeypatch.setattr("job.table.evolution.load_table", counting_load)
    monkeypatch.setattr(query, "load_table", counting_load)
    table = query.open_table(config)
    assert loads == ["load"], "loaded once: evolved, then checked, as one object"
    names = [f.name for f in table.schema().fields]
    assert names == [c.name for c in table_columns(config.event_fields)]
    assert evolve_table(config).empty, "the start evolved the live table"


def test_the_jobs_start_creates_a_local_table_that_does_not_exist(tmp_path: Path) -> None:
    config = _config(tmp_path)
    table = query.open_table(config)
    assert [f.name for f in table.schema().fields] == [
        c.name for c in table_columns(config.event_fields)
    ]
