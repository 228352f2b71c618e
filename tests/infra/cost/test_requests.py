"""infra/cost/requests.py: the measured requests per batch, read back as
written, billed by S3's request classes, and a missing file or target is one
line naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.cost.requests import (
    COUNTS_FILE,
    TARGETS,
    Count,
    RequestCountsError,
    TargetCounts,
    read_counts,
    to_json,
)


def _counts(target: str) -> TargetCounts:
    return TargetCounts(
        target,
        "orders-x",
        12,
        3,
        "2026-12-07",
        (
            Count("s3", "PutObject", "checkpoint", 3.0),
            Count("s3", "CopyObject", "checkpoint", 2.0),
            Count("s3", "ListObjectsV2", "state", 1.5),
            Count("s3", "GetObject", "table/metadata", 4.0),
            Count("s3", "HeadObject", "markers", 2.0),
            Count("s3", "DeleteObject", "checkpoint", 2.0),
            Count("glue", "GetTable", "", 2.0),
            Count("glue", "UpdateTable", "", 1.0),
            Count("monitoring", "PutMetricData", "", 0.5),
            Count("kinesis", "GetRecords", "", 6.0),
        ),
        9.5,
    )


def test_s3_requests_are_billed_by_class_and_deletes_are_free() -> None:
    counts = _counts("emr")
    assert counts.s3_put_class == 3.0 + 2.0 + 1.5
    assert counts.s3_get_class == 4.0 + 2.0
    assert counts.glue == 3.0
    assert counts.put_metric_data == 0.5


def test_what_the_measurement_writes_reads_back_the_same(tmp_path: Path) -> None:
    path = tmp_path / "counts.json"
    written = {t: _counts(t) for t in TARGETS}
    path.write_text(to_json(written, "python -m bench.requests"))
    assert read_counts(path) == written


def test_a_missing_file_or_target_is_one_line_naming_it(tmp_path: Path) -> None:
    with pytest.raises(RequestCountsError, match=r"run python -m bench\.requests"):
        read_counts(tmp_path / "absent.json")
    path = tmp_path / "counts.json"
    path.write_text(to_json({"emr": _counts("emr")}, "x"))
    with pytest.raises(RequestCountsError, match="no counts for serverless"):
        read_counts(path)


def test_the_committed_file_has_both_targets_measured_after_cold_batches() -> None:
    found = read_counts(COUNTS_FILE)
    for target in TARGETS:
        assert found[target].batches >= 10, target
        assert found[target].cold_batches >= 1, target
        assert 0 < found[target].serial <= sum(c.per_batch for c in found[target].counts)
