"""local/supervisor/emr.py against a stand-in for the harness: the local
checkpoint's files decide, a restart starts the job again, a spent budget
alarms, an operator's marker leaves the job stopped, and a failing check in
the thread is recorded, never silent (the whole loop on a real job:
tests/e2e/test_supervisor.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from infra.supervisor.decision import GAVE_UP_BUDGET, Policy, SupervisorState
from local.supervisor.emr import LocalSupervisor
from model import contract
from model.exit_record import ExitRecord, write_exit_record
from tests.job.job_helpers import job_config

POLICY = Policy(max_restarts=1, backoff_sec=1.0, start_grace_sec=50.0)


@dataclass
class FakeLocal:
    """What the supervisor reads of :class:`local.harness.LocalInstance`."""

    config: Any
    name: str = "orders-local"
    job: Any = None
    started: list[float] = field(default_factory=list)

    def start_job(self) -> None:
        self.started.append(time.time())


def _local(tmp_path: Path, *, marker: bool = True) -> FakeLocal:
    config = job_config(
        database="d",
        bootstrap="b:1",
        checkpoint=str(tmp_path / "checkpoint"),
        stop_marker_path=str(tmp_path / "control" / "stop") if marker else None,
    )
    (tmp_path / "control").mkdir()
    return FakeLocal(config)


def _state(supervisor: LocalSupervisor) -> SupervisorState:
    return SupervisorState.from_json(supervisor.state_path.read_bytes(), "test")


def test_a_failed_job_is_restarted_then_alarmed_once_the_budget_is_spent(tmp_path: Path) -> None:
    local = _local(tmp_path)
    write_exit_record(
        local.config.checkpoint_location,
        ExitRecord(1, contract.EXIT_BATCH_FAILED, "kafka down", 10.0, "h:1"),
    )
    now = [100.0]
    supervisor = LocalSupervisor(local, POLICY, clock=lambda: now[0], publish=False)  # type: ignore[arg-type]
    first = supervisor.check()
    assert first.action == "restart" and first.reason == contract.EXIT_BATCH_FAILED
    assert len(local.started) == 1
    assert _state(supervisor).restarts == (100.0,)
    assert supervisor.state_path == tmp_path / "control" / contract.SUPERVISOR_STATE_NAME
    # The restarted job never took the lease within the grace: the one
    # restart of the budget is spent, so it alarms instead of starting again.
    now[0] = 200.0
    second = supervisor.check()
    assert second.action == "alarm"
    assert len(local.started) == 1
    assert supervisor.alarms == [second.message]
    assert _state(supervisor).gave_up == GAVE_UP_BUDGET
    assert [d.action for d in supervisor.decisions] == ["restart", "alarm"]
    assert len(supervisor.restarts) == 1


def test_an_operators_stop_marker_leaves_the_job_stopped(tmp_path: Path) -> None:
    local = _local(tmp_path)
    (tmp_path / "control" / "stop").write_text("operator\n", encoding="utf-8")
    supervisor = LocalSupervisor(local, POLICY, clock=lambda: 100.0, publish=False)  # type: ignore[arg-type]
    decision = supervisor.check()
    assert decision.action == "none"
    assert decision.reason == contract.EXIT_STOPPED_ON_REQUEST
    assert local.started == []
    assert _state(supervisor).stopped_by_operator


def test_a_config_without_a_stop_marker_is_named(tmp_path: Path) -> None:
    supervisor = LocalSupervisor(_local(tmp_path, marker=False), POLICY, publish=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="orders-local: the job config has no stop_marker_path"):
        supervisor.check()


def test_a_failing_check_in_the_thread_is_recorded(tmp_path: Path) -> None:
    local = _local(tmp_path, marker=False)
    supervisor = LocalSupervisor(local, POLICY, interval_sec=0.01, publish=False)  # type: ignore[arg-type]
    supervisor.start()
    try:
        deadline = time.monotonic() + 10
        while len(supervisor.errors) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        supervisor.stop()
    # Two failed checks: the thread went on after the first.
    assert len(supervisor.errors) >= 2
    assert supervisor.errors[0].startswith("ValueError: orders-local:")
    assert local.started == []
