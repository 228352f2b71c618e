"""``python -m bench --quick`` runs every benchmark end to end and writes its
results: valid JSON with the run's machine facts, and a non-empty PNG chart per
benchmark. No timing is asserted (benchmarks are not tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.scale import QUICK as SCALE_QUICK

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = (
    "throughput",
    "dedup",
    "growth",
    "state",
    "overhead",
    "kinesis_source",
    "reader",
    "incident",
    "latency",
    "scale",
)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.mark.spark  # the child process starts a JVM
@pytest.mark.timeout(1500)
def test_quick_bench_writes_json_and_charts(tmp_path: Path) -> None:
    out = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out-dir", str(out), *BENCHMARKS],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1440,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for name in BENCHMARKS:
        result = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
        assert result["benchmark"] == name
        assert result["mode"] == "quick"
        assert result["machine"]["cores"] >= 1
        chart = (out / f"{name}.png").read_bytes()
        assert chart.startswith(PNG_SIGNATURE), f"{name}.png is not a PNG"
    assert "benchmark" in done.stdout and "figure" in done.stdout, "the final table is printed"
    # Each result is read back by its own rows (bench/report_rows.py), not key by key.
    assert "shown key by key" not in done.stdout, done.stdout[-4000:]
    _assert_measured_something(out)


def _assert_measured_something(out: Path) -> None:
    """The newer benchmarks measured what they say (counts, not times)."""
    dedup = json.loads((out / "dedup.json").read_text(encoding="utf-8"))
    for operator in ("timers", "builtin"):
        flat = dedup["flat"][operator]
        # One query: 2 forget records, one batch at 0 keys (quick: one timed
        # round), the fill, the settle batches, one at the fill.
        batch = dedup["batch_records"]
        zero, filled = flat["zero_keys"], flat["filled"]["measured"]
        assert len(zero) == len(filled) == 1
        held = 2 + (len(zero) + dedup["settle_batches"] + len(filled)) * batch + dedup["fill_keys"]
        assert flat["per_key"]["keys_in_state"] == held
        # The fill ran in batches of its size.
        fill_batches = -(-dedup["fill_keys"] // dedup["fill_batch_records"])
        assert len(flat["filled"]["fill_batches"]) == fill_batches
        # The "0 keys" batches ran after every warm-up id was forgotten.
        assert flat["filled"]["forgotten_before_zero"] == 3 * batch
    # The built-in operator reads every key it holds to evict; the timers do not.
    assert dedup["flat"]["builtin"]["bytes_read_at_fill"] > 0
    incident = json.loads((out / "incident.json").read_text(encoding="utf-8"))
    assert incident["shuffles"]["baseline"] >= 1 and incident["shuffles"]["subject"] >= 1
    assert incident["baseline_keys_saved"] > 0 and incident["subject_table_rows"] > 0
    latency = json.loads((out / "latency.json").read_text(encoding="utf-8"))
    assert latency["ids_measured"] > 0
    assert latency["subject"]["whole_run"]["records"] == latency["ids_measured"]
    reader = json.loads((out / "reader.json").read_text(encoding="utf-8"))
    assert reader["records_per_second"], "no reader measured"
    for name, rates in reader["records_per_second"].items():
        assert rates["runs"] and min(rates["runs"]) > 0, name
    assert reader["server_records_per_second"]["median"] > 0
    scale = json.loads((out / "scale.json").read_text(encoding="utf-8"))
    assert len(scale["batches"]) == len(SCALE_QUICK.batch_sizes)
    assert scale["peak_memory_at_largest"]["jvm_driver_and_executor_mib"] > 0
    # One synth timing per instance count of a quick run, each with its runs.
    assert sorted(int(n) for n in scale["synth"]) == sorted(SCALE_QUICK.instance_counts)
    for n, synth in scale["synth"].items():
        assert synth["instances"] == int(n)
        assert synth["seconds"]["runs"] and min(synth["seconds"]["runs"]) > 0, n
