"""bench/dedup_batches.py: the throughput part's source files."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from bench.dedup_batches import write_batches


def test_each_micro_batch_is_two_files_of_half_the_records(tmp_path: Path) -> None:
    write_batches(tmp_path, "t", count=11, batches=3)

    files = sorted(tmp_path.glob("*.parquet"), key=lambda p: p.stat().st_mtime_ns)
    assert len(files) == 6
    rows = [pq.read_table(f).num_rows for f in files]
    assert rows == [6, 5] * 3
