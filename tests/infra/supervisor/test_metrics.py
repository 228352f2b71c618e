"""infra/supervisor/metrics.py: the two data points the supervisor publishes
after each check (the Lambda and the local harness send the same)."""

from __future__ import annotations

from datetime import UTC, datetime

from infra.supervisor.decision import GAVE_UP_BUDGET, SupervisorState
from infra.supervisor.metrics import metric_data
from model import contract

NOW = 1_790_000_000.0


def _by_name(points: list[dict[str, object]]) -> dict[object, dict[str, object]]:
    return {point["MetricName"]: point for point in points}


def test_a_restarting_supervisor_reports_its_restarts_and_not_given_up() -> None:
    state = SupervisorState(restarts=(NOW - 120, NOW - 60, NOW - 5))
    points = _by_name(metric_data("orders-eu-west-1", state, NOW))
    assert set(points) == {contract.SUPERVISOR_RESTARTS, contract.SUPERVISOR_GAVE_UP}
    assert points[contract.SUPERVISOR_RESTARTS]["Value"] == 3.0
    assert points[contract.SUPERVISOR_GAVE_UP]["Value"] == 0.0
    for point in points.values():
        # The instance's own dimensions (the alarm and the dashboard select by them).
        assert point["Dimensions"] == contract.dimensions("orders-eu-west-1")
        assert point["Timestamp"] == datetime.fromtimestamp(NOW, UTC)
        assert point["Unit"] == "Count"


def test_a_supervisor_that_gave_up_reports_1() -> None:
    state = SupervisorState(gave_up=GAVE_UP_BUDGET, gave_up_at=NOW - 1)
    points = _by_name(metric_data("orders-eu-west-1", state, NOW))
    assert points[contract.SUPERVISOR_GAVE_UP]["Value"] == 1.0
    assert points[contract.SUPERVISOR_RESTARTS]["Value"] == 0.0


def test_hand_backs_count_with_the_restarts_in_the_published_figure() -> None:
    """Every start the supervisor asked for is graphed; only the restarts
    spend the budget (infra/supervisor/decision.py)."""
    state = SupervisorState(restarts=(NOW - 60,), handbacks=(NOW - 30, NOW - 5))
    points = _by_name(metric_data("orders-eu-west-1", state, NOW))
    assert points[contract.SUPERVISOR_RESTARTS]["Value"] == 3.0
