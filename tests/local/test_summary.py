"""local/summary.py: the local run's verdict (every event once in the table
or once on the topic with its reason) and its percentiles."""

from __future__ import annotations

import json
from typing import Any

from local.summary import RunFigures, percentile, summarize


def _figures(**overrides: Any) -> RunFigures:
    base: dict[str, Any] = {
        "instance": "orders-test",
        "produced_records": 6,
        "produced_by_kind": {"valid": 3, "duplicate": 1, "malformed_json": 2},
        "expected_ids": frozenset({"a", "b", "c"}),
        "expected_failures": {"s/0/5": "malformed_json", "s/0/6": "malformed_json"},
        "table_ids": ["a", "b", "c"],
        "topic_reasons_by_key": {"s/0/5": ["malformed_json"], "s/0/6": ["malformed_json"] * 2},
        "topic_records": 3,
        "batch_durations_ms": [100.0, 300.0, 200.0],
        "batches": 3,
    }
    base.update(overrides)
    return RunFigures(**base)


def test_summary_accepts_a_complete_run() -> None:
    summary = summarize(_figures())
    assert summary.ok, summary.problems
    assert (summary.unique_events, summary.rows, summary.failure_records) == (5, 3, 2)
    assert summary.failures_by_reason == {"malformed_json": 2}
    assert summary.p50_batch_ms == 200.0
    assert any("5 = 3 + 2 -> OK" in line for line in summary.lines())


def test_the_summary_file_holds_the_verdict_and_the_figures_behind_it() -> None:
    summary = summarize(_figures(table_ids=["a", "b", "b"]))
    written = json.loads(summary.to_json())
    assert written["rows"] == 3
    assert written["duplicate_ids"] == 1
    assert written["problems"] == list(summary.problems) != []
    assert written["figures"]["instance"] == summary.figures.instance
    assert written["figures"]["expected_ids"] == sorted(summary.figures.expected_ids)


def test_summary_counts_kinesis_records_and_aggregates_apart_from_events() -> None:
    summary = summarize(_figures(produced_kinesis_records=4, produced_aggregates=1))
    assert summary.ok
    assert (summary.figures.produced_kinesis_records, summary.figures.produced_aggregates) == (4, 1)
    line = next(x for x in summary.lines() if "Kinesis records" in x)
    assert "4" in line and "(1 KPL aggregates holding 3 of the records)" in line


def test_summary_flags_duplicates_missing_and_wrong_reasons() -> None:
    summary = summarize(
        _figures(
            table_ids=["a", "a", "b"],
            topic_reasons_by_key={"s/0/5": ["not_utf8"], "s/9/9": ["too_large"]},
        )
    )
    assert not summary.ok
    assert summary.duplicate_ids == 1
    assert summary.missing_ids == ("c",)
    assert summary.missing_failures == ("s/0/6",)
    assert summary.unexpected_failures == ("s/9/9",)
    assert summary.wrong_reasons == {"s/0/5": ("malformed_json", "not_utf8")}
    assert any("FAILED" in line for line in summary.lines())


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None
    assert percentile(values, 7) == 7.0  # not 8: 7 / 100 * 100 is 7.000000000000001
