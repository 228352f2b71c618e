"""local/observation.py: when a run is accounted for, its lag and its progress line."""

from __future__ import annotations

from local.observation import Observation


def seen(**changes: int | bool) -> Observation:
    base: dict[str, int | bool] = {
        "seconds": 12,
        "batches": 3,
        "rows": 90,
        "failures": 4,
        "expected_rows": 100,
        "expected_failures": 5,
        "job_running": True,
    }
    return Observation(**{**base, **changes})  # type: ignore[arg-type]


def test_the_lag_counts_missing_rows_and_failures_never_below_zero() -> None:
    assert seen().lag == 11
    assert seen(rows=120, failures=9).lag == 0


def test_accounted_needs_every_row_every_failure_and_no_produce_under_way() -> None:
    assert not seen().accounted
    assert seen(rows=100, failures=5).accounted
    assert not seen(rows=100, failures=5, outside_pending=1).accounted


def test_the_line_names_the_instance_and_what_is_under_way() -> None:
    line = seen(outside_pending=2, job_running=False).line("orders")

    assert line.startswith("[orders]")
    assert "stopped" in line and "rows 90/100" in line and "lag 11" in line
    assert line.endswith("make produce under way: 2")
    assert "under way" not in seen().line("orders")
