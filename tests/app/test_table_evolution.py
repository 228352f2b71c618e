"""An events table created before ``sub_sequence_number`` existed gets it at start."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from app.config import ConfigError, JobConfig
from app.table.catalog import ensure_table, open_catalog
from app.table.evolution import evolve_table, missing_columns
from app.table.layout import SUB_SEQUENCE_NUMBER, partitioning, seed_columns, table_columns
from app.table.schema import iceberg_schema, partition_spec
from tests.app.job_helpers import job_config, local_catalog

DAY = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _config(root: Path) -> JobConfig:
    return job_config(database="evolve", bootstrap="127.0.0.1:1", catalog=local_catalog(str(root)))


def _old_table(config: JobConfig) -> Any:
    """The table as the stack and the job made it before the column existed,
    partitioned and holding one row."""
    from pyiceberg.schema import Schema

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
    assert missing_columns(table.schema()) == [SUB_SEQUENCE_NUMBER]
    with pytest.raises(ConfigError, match="'sub_sequence_number' is missing"):
        ensure_table(config)  # what a job without the evolution step would do

    assert evolve_table(config) == [SUB_SEQUENCE_NUMBER]
    table = ensure_table(config)
    names = [f.name for f in table.schema().fields]
    assert names == [c.name for c in table_columns(config.event_fields)]
    assert names[-1] == SUB_SEQUENCE_NUMBER, "appended after the others"
    rows = table.scan().to_arrow().to_pylist()
    assert [(r["id"], r[SUB_SEQUENCE_NUMBER]) for r in rows] == [("old", None)]
    assert evolve_table(config) == [], "once"


def test_a_table_that_does_not_exist_yet_is_left_to_ensure_table(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert evolve_table(config) == []
    table = ensure_table(config)
    assert missing_columns(table.schema()) == []
