"""scripts.status.report: the report's layout."""

from __future__ import annotations

from scripts.status.report import columns


def test_columns_align() -> None:
    assert columns(["a", "bb"], [["xxx", "1"], ["y", "22"]], indent="") == [
        "a    bb",
        "xxx   1",
        "y    22",
    ]
