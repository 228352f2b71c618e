"""Restart policies (infra/supervisor/decision.py) for the supervisor's tests
against a real local job: tests/e2e/test_supervisor.py (the local harness)
and tests/e2e/test_serverless_self_healing.py (the patched EMR Serverless).

Both run the Lambda's rules at a local pace: the supervisor checks once a
second, so the back-off starts at 1 s, and a started or handed-over job gets
:data:`LOCAL_START_GRACE_SEC` to hold its lease. Each test chooses only its
budget, its window and the back-off's cap.
"""

from __future__ import annotations

from typing import Final

from infra.supervisor.decision import Policy

# A local job (Spark in local mode, its emulators' clients, the lease wait)
# holds its lease well within this; a handover's new version likewise once
# the old one released it.
LOCAL_START_GRACE_SEC: Final = 240.0
LOCAL_BACKOFF_SEC: Final = 1.0


def local_pace_policy(*, max_restarts: int, window_sec: float, backoff_max_sec: float) -> Policy:
    """The supervisor's policy for a test on a local job: a back-off from
    1 s doubling to ``backoff_max_sec``, and :data:`LOCAL_START_GRACE_SEC`
    for a start or a handover."""
    return Policy(
        max_restarts=max_restarts,
        window_sec=window_sec,
        backoff_sec=LOCAL_BACKOFF_SEC,
        backoff_max_sec=backoff_max_sec,
        start_grace_sec=LOCAL_START_GRACE_SEC,
        handover_grace_sec=LOCAL_START_GRACE_SEC,
    )
