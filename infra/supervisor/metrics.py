"""What the supervisor publishes after every check, in the instance's own
namespace (``model.contract.metric_namespace``): the starts it asked for in its
rolling window, restarts and hand-backs to the stack's version alike (the
dashboard graphs it; only the restarts spend the budget), and whether it has
given up (1) or not (0),
which the ``SupervisorGaveUp`` alarm watches. Pure: the Lambda and the local
harness send the same data points (``PutMetricData``'s ``MetricData`` shape,
https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricData.html).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from infra.supervisor.decision import SupervisorState
from model import contract


def metric_data(instance: str, state: SupervisorState, now: float) -> list[dict[str, Any]]:
    stamp = datetime.fromtimestamp(now, UTC)
    dimensions = contract.dimensions(instance)
    return [
        {
            "MetricName": contract.SUPERVISOR_RESTARTS,
            "Dimensions": dimensions,
            "Timestamp": stamp,
            "Value": float(len(state.restarts) + len(state.handbacks)),
            "Unit": "Count",
        },
        {
            "MetricName": contract.SUPERVISOR_GAVE_UP,
            "Dimensions": dimensions,
            "Timestamp": stamp,
            "Value": 1.0 if state.gave_up is not None else 0.0,
            "Unit": "Count",
        },
    ]
