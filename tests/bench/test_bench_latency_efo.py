"""``python -m bench latency_efo --quick``: the job's query reads through
enhanced fan-out end to end, beside the bare EFO loop on the same stream, and
the result says what it measured (counts, not times)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.quick_run import quick_result


@pytest.mark.spark  # the child process starts a JVM
@pytest.mark.emulators  # its own moto server and SubscribeToShard front
@pytest.mark.timeout(600)
def test_quick_latency_efo_reads_the_job_through_subscriptions(tmp_path: Path) -> None:
    result, stdout = quick_result("latency_efo", tmp_path / "results", timeout=580)
    assert result["source"] == {
        "consumer_type": "SubscribeToShard",
        "consumer_name": "bench-latency-job",
    }
    # Every valid id put became readable (else the run raises), and the bare
    # EFO loop received every one of them too.
    subject, baseline = result["subject"]["whole_run"], result["baseline"]["whole_run"]
    assert subject["records"] == result["ids_measured"] > 0
    assert baseline["records"] == result["ids_measured"]
    assert result["baseline"]["label"] == "bare EFO loop"
    assert 0 < subject["p50_seconds"] <= subject["p99_seconds"]
    assert 0 < baseline["p50_seconds"] <= baseline["p99_seconds"]
    assert result["batches"]["batches"] > 0
    assert "bare EFO loop p99" in stdout
