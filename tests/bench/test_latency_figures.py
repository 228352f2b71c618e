"""bench/latency_figures.py: ids into windows, percentiles, the batches' figures."""

from __future__ import annotations

import math

import pytest

from bench.latency_figures import Windows, batch_figures, job_split, percentile, stats


def test_percentile_is_the_nearest_rank_and_refuses_no_values() -> None:
    assert percentile([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert percentile([3.0, 1.0, 2.0, 4.0], 99) == 4.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)


def test_each_id_lands_in_the_window_of_its_put_and_the_last_takes_the_overrun() -> None:
    puts = {"a": 100.0, "b": 109.0, "c": 111.0, "d": 135.0}
    readable = {"a": 101.0, "b": 111.0, "c": 112.5, "d": 136.0}
    seen = {"a": 100.5, "c": 111.5}

    found = Windows.split(puts, readable, seen, started=100.0, windows=2, window_sec=10)

    assert found.ours == [[1.0, 2.0], [1.5, 1.0]]
    assert found.theirs == [[0.5], [0.5]]
    assert [w["records"] for w in found.per_window] == [2, 2]
    assert found.p99s == [2.0, 1.5]
    assert found.p99 == 1.75
    assert found.loop_p99 == 0.5
    assert found.ratio == pytest.approx(3.5)


def test_an_id_never_readable_fails_the_run() -> None:
    with pytest.raises(RuntimeError, match="1 produced ids never became readable"):
        Windows.split({"a": 1.0, "b": 2.0}, {"a": 3.0}, {}, started=0.0, windows=1, window_sec=10)


def test_without_a_loop_figure_the_ratio_is_not_a_number() -> None:
    found = Windows.split({"a": 1.0}, {"a": 3.0}, {}, started=0.0, windows=1, window_sec=10)

    assert found.paired == []
    assert found.loop_windows == []
    assert math.isnan(found.ratio) and math.isnan(found.loop_p99)


def test_stats_of_a_window() -> None:
    assert stats([0.5, 1.25, 2.0]) == {
        "records": 3,
        "p50_seconds": 1.25,
        "p99_seconds": 2.0,
        "max_seconds": 2.0,
    }


def test_batch_figures_count_only_batches_that_ran() -> None:
    idle = {"durationMs": {"triggerExecution": 5}, "numInputRows": 0}
    ran = [
        {"durationMs": {"addBatch": 900, "triggerExecution": 1000}, "numInputRows": 10},
        {"durationMs": {"addBatch": 1900, "triggerExecution": 2000}, "numInputRows": 30},
    ]

    figures = batch_figures([idle, *ran])

    assert figures["batches"] == 2
    assert figures["input_rows_per_batch_median"] == 20
    assert figures["trigger_execution_p99_seconds"] == 2.0
    assert figures["duration_ms_median"] == {"addBatch": 1400, "triggerExecution": 1500}
    assert batch_figures([idle]) == {"batches": 0}


def test_job_split_is_the_median_of_the_batches_after_the_warm_up() -> None:
    seconds = {
        0: {"total": 9.0, "pass": 9.0},
        1: {"total": 1.0, "pass": 0.5, "commit": 0.5},
        2: {"total": 3.0, "pass": 2.0, "commit": 1.0},
    }

    assert job_split(seconds, after_batch=0) == {"commit": 0.75, "pass": 1.25, "total": 2.0}
