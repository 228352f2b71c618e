"""make status's supervisor lines, read from a local run's files: nothing
checked yet, restarting, given up (naming the reason), stopped by an operator."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from infra.supervisor.decision import SupervisorState
from infra.supervisor.status import read_supervisor
from model import contract
from model.exit_record import ExitRecord, write_exit_record
from tests.job.job_helpers import job_config


def _config(tmp_path: Path):  # type: ignore[no-untyped-def]
    return job_config(
        database="d",
        bootstrap="b:1",
        checkpoint=str(tmp_path / "checkpoint"),
        stop_marker_path=str(tmp_path / "stop"),
    )


def test_nothing_checked_yet(tmp_path: Path) -> None:
    status = read_supervisor(_config(tmp_path), None)
    assert status is not None and not status.checked
    assert status.lines() == [
        f"supervisor not checked yet ({tmp_path / contract.SUPERVISOR_STATE_NAME})",
        "last exit  -",
    ]


def test_a_give_up_names_the_reason_and_the_last_exit(tmp_path: Path) -> None:
    config = _config(tmp_path)
    write_exit_record(
        config.checkpoint_location,
        ExitRecord(1, contract.EXIT_BATCH_FAILED, "kafka down", 10.0, "h:1"),
    )
    state = SupervisorState(
        restarts=(1.0, 2.0),
        last_reason=contract.EXIT_BATCH_FAILED,
        last_detail="restart budget spent: 2 restarts in the last 3600s",
        gave_up="budget",
    )
    (tmp_path / contract.SUPERVISOR_STATE_NAME).write_text(state.to_json(), encoding="utf-8")
    status = read_supervisor(config, None)
    assert status is not None
    first, last = status.lines()
    assert first.startswith("supervisor GAVE UP (budget): restart budget spent")
    assert "2 restart(s) in its window, last reason batch_failed" in first
    assert last == "last exit  exit 1 batch_failed: kafka down"
    running = replace(state, gave_up=None)
    (tmp_path / contract.SUPERVISOR_STATE_NAME).write_text(running.to_json(), encoding="utf-8")
    assert "restarts the job when it is down" in read_supervisor(config, None).lines()[0]  # type: ignore[union-attr]
    stopped = replace(running, stopped_by_operator=True)
    (tmp_path / contract.SUPERVISOR_STATE_NAME).write_text(stopped.to_json(), encoding="utf-8")
    assert "an operator stopped it" in read_supervisor(config, None).lines()[0]  # type: ignore[union-attr]


def test_hand_backs_are_shown_beside_the_restarts(tmp_path: Path) -> None:
    config = _config(tmp_path)
    state = SupervisorState(restarts=(1.0,), handbacks=(2.0,), last_reason="handback")
    (tmp_path / contract.SUPERVISOR_STATE_NAME).write_text(state.to_json(), encoding="utf-8")
    status = read_supervisor(config, None)
    assert status is not None
    assert (
        "1 restart(s) in its window, 1 hand-back(s) to the stack's version, last reason handback"
        in status.lines()[0]
    )
    without = replace(state, handbacks=())
    (tmp_path / contract.SUPERVISOR_STATE_NAME).write_text(without.to_json(), encoding="utf-8")
    assert "hand-back" not in read_supervisor(config, None).lines()[0]  # type: ignore[union-attr]
