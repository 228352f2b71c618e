"""Restart policies (infra/supervisor/decision.py) for the supervisor's tests
against a real local job: tests/e2e/test_supervisor.py (the local harness)
and tests/e2e/test_serverless_self_healing.py (the patched EMR Serverless).

Both run the Lambda's rules at a local pace: the supervisor checks once a
second, so the back-off starts at 1 s, and a started or handed-over job gets
240 s to hold its lease (:data:`LOCAL_PACE`). Each test chooses only its
budget, its window and the back-off's cap.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from infra.supervisor.decision import Policy

# A local job (Spark in local mode, its emulators' clients, the lease wait)
# holds its lease well within 240 s; a handover's new version likewise once the
# old one released it. The supervisor checks once a second: a back-off from 1 s.
LOCAL_PACE: Final = Policy(backoff_sec=1, start_grace_sec=240, handover_grace_sec=240)


def local_pace_policy(*, max_restarts: int, window_sec: float, backoff_max_sec: float) -> Policy:
    """:data:`LOCAL_PACE` with the test's budget, window and back-off cap."""
    return replace(
        LOCAL_PACE,
        max_restarts=max_restarts,
        window_sec=window_sec,
        backoff_max_sec=backoff_max_sec,
    )
