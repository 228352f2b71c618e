"""Job runs of the patched EMR Serverless emulator, run as local processes.

:mod:`local.serverless_moto` keeps a job run's request and applies the retry
policy, but runs nothing. :class:`RunProcesses` runs something: each attempt
of a run (its start, each retry) is a process from ``launch(run)`` (in a local
run, :func:`local.serverless_launch.start` of the instance the application
belongs to; in a test, any command), and :meth:`RunProcesses.poll` turns each
ended process into the state the service would show, through
:func:`local.serverless_moto.end_attempt`: status 0 ``SUCCESS``, a failed
attempt retried within the policy (a new process) or ``FAILED``.
``CancelJobRun`` kills the run's process (its whole process group).

In-process only (``moto.mock_aws`` with :func:`local.serverless_moto.patched`):
the callbacks run where moto's backend does.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from local import serverless_moto

Launch = Callable[[Any], "subprocess.Popen[bytes]"]


@dataclass
class RunProcesses:
    """The process of each active run's current attempt."""

    launch: Launch
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    ended: list[tuple[str, int, int, str]] = field(default_factory=list)

    def __enter__(self) -> RunProcesses:
        serverless_moto.on_start.append(self._start)
        serverless_moto.on_retry.append(self._start)
        serverless_moto.on_cancel.append(self._cancel)
        return self

    def __exit__(self, *_: object) -> None:
        for callbacks, callback in (
            (serverless_moto.on_start, self._start),
            (serverless_moto.on_retry, self._start),
            (serverless_moto.on_cancel, self._cancel),
        ):
            with contextlib.suppress(ValueError):
                callbacks.remove(callback)
        for process in self.processes.values():
            _kill(process)
        self.processes.clear()

    def _start(self, run: Any) -> None:
        self.processes[run.id] = self.launch(run)

    def _cancel(self, run: Any) -> None:
        process = self.processes.pop(run.id, None)
        if process is not None:
            _kill(process)

    def poll(self, runs: Callable[[str], Any]) -> list[tuple[str, int, str]]:
        """End the attempts whose process exited: ``(run id, status, new state)``
        each. ``runs(run_id)`` is moto's run object."""
        done: list[tuple[str, int, str]] = []
        for run_id, process in list(self.processes.items()):
            status = process.poll()
            if status is None:
                continue
            del self.processes[run_id]
            run = runs(run_id)
            attempt = run.attempt
            state = serverless_moto.end_attempt(run, status)  # a retry relaunches
            self.ended.append((run_id, attempt, status, state))
            done.append((run_id, status, state))
        return done


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
