"""What the supervisor knows of the instance's job: restarts (and hand-backs to
the stack's version) in its window, the last exit reason, given up or not,
stopped by an operator or not.

Read from the supervisor's state (``control/<instance>/supervisor.json`` in
the data bucket, written by its Lambda after every check; a local run's
``<instance dir>/supervisor.json``, written by :mod:`local.supervisor.emr`) and
the job's exit record (:mod:`model.exit_record`). Either may be missing: no
supervisor has checked yet, or the job never exited. ``make status``
(:mod:`scripts.status`) prints it; it lives beside the supervisor that writes
the state, and imports only the model and :mod:`infra.supervisor.decision`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.supervisor.decision import SupervisorState
from model import contract
from model.config import JobConfig
from model.exit_record import ExitRecord, read_exit_record
from model.storage_uri import read_object_if_present


@dataclass(frozen=True)
class SupervisorStatus:
    where: str
    checked: bool  # a supervisor has written its state
    restarts_in_window: int = 0
    last_reason: str | None = None
    last_detail: str = ""
    gave_up: str | None = None
    stopped_by_operator: bool = False
    last_exit: str | None = None  # the job's exit record, one line
    handbacks_in_window: int = 0  # hand-backs to the stack's version (not in the budget)

    def lines(self) -> list[str]:
        exit_line = f"last exit  {self.last_exit or '-'}"
        if not self.checked:
            return [f"supervisor not checked yet ({self.where})", exit_line]
        if self.gave_up is not None:
            doing = f"GAVE UP ({self.gave_up}): {self.last_detail}"
        elif self.stopped_by_operator:
            doing = "leaves the job stopped (an operator stopped it)"
        else:
            doing = "restarts the job when it is down"
        handbacks = (
            f", {self.handbacks_in_window} hand-back(s) to the stack's version"
            if self.handbacks_in_window
            else ""
        )
        return [
            f"supervisor {doing}; {self.restarts_in_window} restart(s) in its window"
            f"{handbacks}, last reason {self.last_reason or '-'}",
            exit_line,
        ]


def read_supervisor(config: JobConfig, s3: Any) -> SupervisorStatus | None:
    """None when the job config has no stop marker (no control prefix to look in)."""
    if config.stop_marker_path is None:
        return None
    where = contract.supervisor_state_path(config.stop_marker_path)
    record: ExitRecord | None = read_exit_record(config.checkpoint_location, s3)
    last_exit = record.line() if record is not None else None
    body = read_object_if_present(where, s3)
    if body is None:
        return SupervisorStatus(where, checked=False, last_exit=last_exit)
    state = SupervisorState.from_json(body, where)
    return SupervisorStatus(
        where,
        checked=True,
        restarts_in_window=len(state.restarts),
        last_reason=state.last_reason,
        last_detail=state.last_detail,
        gave_up=state.gave_up,
        stopped_by_operator=state.stopped_by_operator,
        last_exit=last_exit,
        handbacks_in_window=len(state.handbacks),
    )
