"""docs/benchmarks.md is generated from bench/results/*.json (``make
bench-report``): the committed page must be exactly what the committed results
give, and a result the report does not know, or whose shape changed, still
gets a section (its figures key by key, its bars with their verdicts). The
table ``python -m bench`` prints is built from the same saved results by the
same rows, so a run and the page say the same."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench import __main__ as bench_main
from bench import report
from bench.framework import RESULTS, Context
from bench.report_rows import KNOWN, rows_for

COMMITTED = report.DOC


def _write(folder: Path, name: str, body: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(body), encoding="utf-8")


def test_the_committed_page_is_what_the_results_give(tmp_path: Path) -> None:
    regenerated = tmp_path / "benchmarks.md"
    assert report.main(["--results", str(RESULTS), "--out", str(regenerated)]) == 0
    assert regenerated.read_text(encoding="utf-8") == COMMITTED.read_text(encoding="utf-8"), (
        "docs/benchmarks.md differs from bench/results/*.json: run make bench-report"
    )


def test_check_fails_on_a_stale_page_and_passes_on_a_fresh_one(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    assert report.main(["--results", str(results), "--out", str(page)]) == 0
    assert report.main(["--results", str(results), "--out", str(page), "--check"]) == 0
    # A re-run benchmark changes a figure; the page was not regenerated.
    throughput = json.loads((results / "throughput.json").read_text(encoding="utf-8"))
    throughput["ratio_baseline_to_subject"]["of_medians"] = 0.123
    _write(results, "throughput", throughput)
    assert report.main(["--results", str(results), "--out", str(page), "--check"]) == 1
    assert "0.12x" in report.render(results)


def test_every_committed_result_has_a_section_and_known_ones_their_own_reader() -> None:
    """A benchmark the report knows must still be read by its reader (a
    re-shaped JSON would otherwise quietly fall back to the key/value table:
    update bench/report_rows.py); one it does not know just needs a section."""
    page = COMMITTED.read_text(encoding="utf-8")
    for path in sorted(RESULTS.glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        assert f"\n## {result['benchmark']}\n" in page, path.name
        if result["benchmark"] in KNOWN:
            _rows, fallback = rows_for(result)
            assert fallback is None, f"{path.name}: {fallback}"


def test_an_unknown_benchmark_gets_a_generic_table_with_its_bars_and_verdicts(
    tmp_path: Path,
) -> None:
    _write(
        tmp_path,
        "novel",
        {
            "benchmark": "novel",
            "measured_at": "2027-01-01T00:00:00Z",
            "what": "Novel: a benchmark nobody taught the report.\n\nDetails here.",
            "records": 1000,
            "speedup": {"of_medians": 2.5, "bar": ">= 2", "met": True},
            "slowdown": {"p50_seconds": 9.0, "bar": "p50 < 1", "met": False},
            "runs": list(range(100)),
            "machine": {"cores": 2, "pyspark": "4.1.1"},
        },
    )
    page = report.render(tmp_path)
    assert "\n## novel\n" in page
    assert "Novel: a benchmark nobody taught the report." in page
    assert "Shown as recorded, key by key: no reader for this benchmark" in page
    assert "| speedup | of_medians 2.5 | >= 2 | met |" in page
    assert "| slowdown | p50_seconds 9.0 | p50 < 1 | MISSED |" in page
    assert "| records | 1000 |  |  |" in page
    assert "- Machine: cores 2; pyspark 4.1.1." in page
    assert "code: not recorded" in page
    assert (
        "| [novel](#novel) | Novel: a benchmark nobody taught the report. | "
        "2027-01-01T00:00:00Z | 4.1.1 | not recorded | 1 of 2 |"
    ) in page


def test_a_known_benchmark_of_another_shape_and_an_unreadable_file_degrade(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "throughput", {"benchmark": "throughput", "records": 5})
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    page = report.render(tmp_path)
    assert "its JSON is not the shape bench/report_rows.py reads (KeyError" in page
    assert "| records | 5 |  |  |" in page
    assert "\n## broken\n" in page and "`bench/results/broken.json` could not be read" in page


def test_dedup_results_as_bench_dedup_writes_them() -> None:
    """bench/dedup.py records its bars, not its verdicts: the report judges."""

    def operator(ratio: float) -> dict[str, Any]:
        return {
            "ratio": ratio,
            "seconds_at_zero": {"min": 1.0, "median": 1.0, "runs": [1.0]},
            "seconds_at_fill": {"min": ratio, "median": ratio, "runs": [ratio]},
            "per_key": {
                "keys_in_state": 10_000_000,
                "rocksdb_sst_file_bytes_per_key": 40.0,
                "checkpoint_state_dir_bytes_per_key": 80.0,
            },
        }

    result = {
        "benchmark": "dedup",
        "batch_records": 10_000,
        "fill_keys": 10_000_000,
        "throughput_batch_records": 200_000,
        "flat": {"timers": operator(1.05), "builtin": operator(3.0)},
        "throughput": {"ratio_vs_builtin": 0.7, "ratio_vs_bare": 0.6},
        "bars": {"flat": 1.2, "vs_builtin": 0.8, "vs_bare": 0.5},
    }
    rows, fallback = rows_for(result)
    assert fallback is None
    verdicts = {row.figure: row.verdict for row in rows}
    assert verdicts == {
        "timers: 10,000-record batch at 10,000,000 keys vs 0 keys": "met",
        "timers: state per key at 10,000,000 keys": "",
        "builtin: 10,000-record batch at 10,000,000 keys vs 0 keys": "",
        "builtin: state per key at 10,000,000 keys": "",
        "micro-batch of 200,000: timers vs builtin (builtin s / timers s)": "MISSED",
        "micro-batch of 200,000: vs bare Spark (bare s / timers s)": "met",
    }


def _stop_result() -> dict[str, Any]:
    result: dict[str, Any] = json.loads((RESULTS / "stop.json").read_text(encoding="utf-8"))
    return result


def test_a_stop_result_gets_its_own_rows_and_its_verdict() -> None:
    result = _stop_result()
    rows, fallback = rows_for(result)
    assert fallback is None
    judged = [row for row in rows if row.met is not None]
    assert [row.figure for row in judged] == ["stop marker to exit, max"]
    assert judged[0].bar == f"<= trigger + slowest batch = {result['bound_sec']:.2f} s"
    assert judged[0].verdict == ("met" if result["met"] else "MISSED")
    slow = {**result, "max_sec": result["bound_sec"] + 1, "met": False}
    assert [row.verdict for row in rows_for(slow)[0] if row.met is not None] == ["MISSED"]


def test_the_run_prints_the_rows_the_page_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A benchmark only measures and saves; ``python -m bench`` reads the
    saved result back for its table, so its wording cannot drift from the page."""

    def saved_stop(ctx: Context) -> None:
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy(RESULTS / "stop.json", ctx.out_dir / "stop.json")

    monkeypatch.setattr(bench_main, "_benchmarks", lambda: {"stop": saved_stop})
    out = tmp_path / "results"

    assert bench_main.main(["stop", "--out-dir", str(out)]) == 0

    printed = capsys.readouterr().out
    page = report.render(out)
    rows, _ = rows_for(_stop_result())
    for row in rows:
        assert row.figure in printed and row.value in printed, row
        assert f"| {row.figure} | {row.value} |" in page, row


def test_a_latency_run_whose_query_ran_no_batch_is_read_not_shown_key_by_key() -> None:
    """A quick run on a loaded machine can end before a batch with data."""
    result = json.loads((RESULTS / "latency.json").read_text(encoding="utf-8"))
    rows, fallback = rows_for({**result, "batches": {"batches": 0}})
    assert fallback is None
    assert {row.figure: row.value for row in rows}["batches (median)"] == "no batch with data ran"
