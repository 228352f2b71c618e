"""job.batch_gate and the graceful stop it gives ``supervise``: the batch in
flight runs on and commits, the next one is refused before it does anything,
and the query's ending on that refusal is a stop on request, not a failure.

The "stream thread" here is a Python thread calling the gated function as
Spark's does, batch after batch with no pause between them (steady load):
no moment without a running batch ever comes."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from job.batch_gate import REFUSED, BatchGate, BatchRefusedError, refusal
from job.outcome import ExitCode, Outcome
from job.query import _asked_to_stop, supervise
from model import contract
from model.graceful_stop import StopMarker, StopRequest
from model.polling import poll_until
from tests.fake_clock import FakeClock
from tests.job.job_helpers import job_config


def test_a_closed_gate_refuses_the_next_batch_before_it_runs() -> None:
    ran: list[int] = []
    gate = BatchGate()
    gated = gate.wrap(lambda _batch, batch_id: ran.append(batch_id))
    gated(None, 1)
    gate.close()
    with pytest.raises(BatchRefusedError, match=f"{REFUSED}: batch 2 runs at the next start"):
        gated(None, 2)
    assert ran == [1] and gate.refused == 2


def test_the_batch_in_flight_when_the_gate_closes_runs_to_its_end() -> None:
    entered, release = threading.Event(), threading.Event()
    done: list[int] = []

    def batch(_batch: Any, batch_id: int) -> None:
        entered.set()
        release.wait(10)
        done.append(batch_id)

    gate = BatchGate()
    worker = threading.Thread(target=gate.wrap(batch), args=(None, 5))
    worker.start()
    entered.wait(10)
    gate.close()
    assert gate.running and gate.idle_for() == 0.0
    release.set()
    worker.join(10)
    assert done == [5] and not gate.running and gate.refused is None


def test_idle_time_counts_from_the_last_batch_or_the_close() -> None:
    clock = FakeClock()
    gate = BatchGate(clock=clock)
    gate.wrap(lambda _b, _i: clock.sleep(3.0))(None, 0)
    clock.sleep(1.5)
    assert gate.idle_for() == pytest.approx(1.5)
    gate.close()
    clock.sleep(0.5)
    assert gate.idle_for() == pytest.approx(0.5)


def test_only_the_gates_own_refusal_is_a_stop() -> None:
    gate = BatchGate()
    assert not refusal(RuntimeError(f"... {REFUSED} ..."), gate), "no batch refused yet"
    gate.close()
    with pytest.raises(BatchRefusedError):
        gate.wrap(lambda _b, _i: None)(None, 9)
    assert refusal(RuntimeError(f"Traceback ... BatchRefusedError: {REFUSED}: batch 9"), gate)
    assert not refusal(RuntimeError("batch 9 failed: Kafka down"), gate)
    assert not refusal(None, gate)


class BusyQuery:
    """A streaming query under steady load: its stream thread runs batches of
    ``batch_sec`` back to back through ``process``; a batch that raises ends
    the query with that error, as Spark ends it."""

    def __init__(self, gate: BatchGate, batch_sec: float) -> None:
        self.batches: list[int] = []
        self.stop_calls = 0
        self._error: Exception | None = None
        self._active = True
        self._process = gate.wrap(lambda _frame, _batch_id: time.sleep(batch_sec))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        batch_id = 0
        while self._active:
            try:
                self._process(None, batch_id)
            except Exception as exc:
                self._error = exc
                self._active = False
                return
            self.batches.append(batch_id)
            batch_id += 1

    def awaitTermination(self, timeout: float | None = None) -> bool:  # noqa: N802 (Spark's name)
        self._thread.join(timeout)
        if self._error is not None:  # as PySpark raises the query's exception
            raise self._error
        return not self._active

    @property
    def status(self) -> dict[str, Any]:
        return {"isTriggerActive": self._active}

    @property
    def isActive(self) -> bool:  # noqa: N802 (Spark's name)
        return self._active

    def stop(self) -> None:
        self.stop_calls += 1
        self._active = False

    def exception(self) -> Exception | None:
        return self._error


def test_under_steady_load_the_stop_ends_after_the_batch_in_flight() -> None:
    """Batches of 0.3 s back to back on a 1 s trigger: the stop ends on the
    next batch's refusal, within that batch's time plus a little, with no
    interrupt (``stop()`` never called) and exit 0 recorded as requested."""
    stop, outcome = StopRequest(), Outcome()
    gate = BatchGate(stop.event.is_set)
    query = BusyQuery(gate, batch_sec=0.3)
    poll_until(lambda: len(query.batches) >= 2, timeout=10, interval=0.01,
               on_timeout=lambda: TimeoutError("no batch ran"))  # fmt: skip
    stop.request("signal SIGTERM")
    config = job_config(database="d", bootstrap="b:1", trigger_interval_sec=1,
                        stop_poll_interval_sec=1)  # fmt: skip
    began = time.monotonic()
    code = supervise(query, config, stop=stop, outcome=outcome, gate=gate)  # type: ignore[arg-type]
    took = time.monotonic() - began
    assert code == ExitCode.OK
    assert query.stop_calls == 0, "ended by the refusal, not by an interrupt"
    assert gate.refused == query.batches[-1] + 1, "the batch after the last one that ran"
    assert outcome.reason == contract.EXIT_STOPPED_ON_REQUEST
    assert outcome.stopped_by == contract.STOP_BY_OPERATOR
    assert took < 0.3 + config.trigger_interval_sec, "one batch plus one trigger at most"


def test_a_marker_is_seen_by_the_next_batch_and_consumed(tmp_path: Path) -> None:
    """The marker written while a batch runs: the next batch start sees it
    (no wait for the main loop's poll), the query ends on the refusal, the
    marker is consumed and the stop recorded as the operator's."""
    path = tmp_path / "stop"
    stop, outcome, marker = StopRequest(), Outcome(), StopMarker(str(path))
    gate = BatchGate(_asked_to_stop(stop, marker))
    query = BusyQuery(gate, batch_sec=0.3)
    config = job_config(database="d", bootstrap="b:1", trigger_interval_sec=1,
                        stop_poll_interval_sec=5)  # fmt: skip
    threading.Timer(0.5, lambda: path.write_text("stop\n")).start()
    began = time.monotonic()
    code = supervise(query, config, stop=stop, marker=marker, outcome=outcome, gate=gate)  # type: ignore[arg-type]
    took = time.monotonic() - began
    assert code == ExitCode.OK and query.stop_calls == 0
    assert not path.exists(), "consumed"
    assert outcome.stopped_by == contract.STOP_BY_OPERATOR
    assert outcome.detail == f"stop marker {path}"
    assert took < 0.5 + 0.3 + config.trigger_interval_sec, "well before the 5 s poll"
