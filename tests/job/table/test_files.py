"""``job.table.files``: the data files a batch is written to, partitioned by
the UTC day of the event (a local catalog, no JVM)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from job.table.catalog import ensure_table, file_io_properties
from job.table.files import write_data_files
from tests.job.table.test_commit import _batch, _config


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
