"""The supervisor on this machine: the harness plays EMR.

The same :func:`infra.supervisor.decision.decide` as the Lambda, with local
adapters around it: the lease is the local checkpoint's ``flock``
(:func:`model.lease.file_lease_state`), the exit record is read from the local
checkpoint (:mod:`model.exit_record`), a "restart" starts the job's child
process on the same configuration (what ``AddJobFlowSteps`` of the stack's
step does on EMR; :meth:`local.harness.LocalInstance.start_job` clears a stale
stop marker as the launcher does), an alarm is kept in :attr:`alarms` (the
Lambda publishes it to the alarm topic), and the metrics go to the emulated
CloudWatch. An operator's stop marker (``make stop-job --work-dir``) is
read as the Lambda reads it: the job is left stopped. Its state is written
to ``<instance dir>/supervisor.json``, where ``make status --work-dir``
reads it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.supervisor.decision import Decision, Observation, Policy, SupervisorState, decide
from infra.supervisor.metrics import metric_data
from local.harness import LocalInstance
from local.metrics import cloudwatch_client
from model import contract
from model.exit_record import read_exit_record
from model.graceful_stop import StopMarker
from model.lease import file_lease_state, lease_path
from model.storage_uri import local_path, write_object

log = logging.getLogger(__name__)


@dataclass
class LocalSupervisor:
    """Checks ``local`` every ``interval_sec`` in a thread (:meth:`start`), or
    once per :meth:`check`; ``decisions`` and ``alarms`` are what it did."""

    local: LocalInstance
    policy: Policy
    interval_sec: float = 1.0
    clock: Callable[[], float] = time.time
    publish: bool = True
    state: SupervisorState = field(default_factory=SupervisorState)
    decisions: list[Decision] = field(default_factory=list)
    alarms: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def state_path(self) -> Path:
        marker = self.local.config.stop_marker_path
        if marker is None:
            raise ValueError(f"{self.local.name}: the job config has no stop_marker_path")
        return Path(local_path(contract.supervisor_state_path(marker)))

    def observe(self) -> Observation:
        checkpoint = self.local.config.checkpoint_location
        lease = file_lease_state(Path(local_path(lease_path(checkpoint))))
        job = self.local.job
        marker_path = self.local.config.stop_marker_path
        marker = StopMarker(marker_path) if marker_path is not None else None
        return Observation(
            now=self.clock(),
            running=lease.running,
            exit=read_exit_record(checkpoint),
            # YARN has the application but its driver has not taken the lease yet.
            start_pending=job is not None and job.running and not lease.running,
            stop_requested=marker is not None
            and marker.present()
            and marker.requester() == contract.STOP_BY_OPERATOR,
        )

    def check(self) -> Decision:
        with self._lock:
            decision = decide(self.observe(), self.state, self.policy)
            self.state = decision.state
            # Replaced whole: `make status` may read it at any moment.
            write_object(str(self.state_path), self.state.to_json().encode("utf-8"))
            if decision.action == "restart":
                log.warning("supervisor: %s", decision.message)
                self.local.start_job()
            elif decision.action == "alarm":
                log.error("supervisor ALARM: %s", decision.message)
                self.alarms.append(decision.message)
            self.decisions.append(decision)
            if self.publish:
                self._put_metrics(decision.state)
            return decision

    def _put_metrics(self, state: SupervisorState) -> None:
        config = self.local.config
        client: Any = cloudwatch_client(config.region, self.local.endpoints.aws_url)
        client.put_metric_data(
            Namespace=contract.metric_namespace(config.instance_id),
            MetricData=metric_data(config.instance_id, state, self.clock()),
        )

    @property
    def restarts(self) -> list[Decision]:
        return [d for d in self.decisions if d.action == "restart"]

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="supervisor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_sec):
            try:
                self.check()
            except Exception as exc:  # reported by the tests, never a silent stop
                self.errors.append(f"{type(exc).__name__}: {exc}")
                log.exception("supervisor check failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
