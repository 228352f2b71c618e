"""local/checkpoint_files.py: a checkpoint's offsets, commits and query id, read from its files."""

from __future__ import annotations

import json
from pathlib import Path

from local import checkpoint_files


def test_an_empty_directory_has_no_batches_and_no_query_id(tmp_path: Path) -> None:
    assert checkpoint_files.offsets(tmp_path) == {}
    assert checkpoint_files.committed_batches(tmp_path) == set()
    assert checkpoint_files.query_id(tmp_path) is None
    (tmp_path / "metadata").write_text("\n", encoding="utf-8")
    assert checkpoint_files.query_id(tmp_path) is None


def test_each_batch_s_source_offset_is_its_third_line_in_batch_order(tmp_path: Path) -> None:
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    for batch in (10, 2):
        lines = ["v1", json.dumps({"batchWatermarkMs": 0}), json.dumps({"batch": batch})]
        (offsets / str(batch)).write_text("\n".join(lines), encoding="utf-8")
    (offsets / ".2.crc").write_text("x", encoding="utf-8")
    (offsets / "7").write_text("v1\n{}", encoding="utf-8")  # written halfway: skipped

    found = checkpoint_files.offsets(tmp_path)

    assert list(found) == [2, 10]
    assert found[10] == {"batch": 10}


def test_committed_batches_and_the_query_id(tmp_path: Path) -> None:
    commits = tmp_path / "commits"
    commits.mkdir()
    for name in ("0", "1", ".1.crc", "tmp"):
        (commits / name).write_text("v1", encoding="utf-8")
    (tmp_path / "metadata").write_text('{"id":"q-1"}\n', encoding="utf-8")

    assert checkpoint_files.committed_batches(tmp_path) == {0, 1}
    assert checkpoint_files.query_id(tmp_path) == "q-1"
