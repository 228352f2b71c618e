"""``supervise()``: the job's main loop, driven with a fake query (no JVM).

The loop's decisions are Python logic: which exit code, whether it waits for
the running batch before stopping, whether the stop marker is consumed. A
scripted query stands in for Spark's ``StreamingQuery``; the same paths with a
real query run in ``test_job_stream.py``, ``test_job_main.py`` (SIGTERM to
``python -m job``) and the e2e suite (the stop marker ends a real job).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from job.driver import EXIT_LEASE_LOST, EXIT_OK, EXIT_QUERY_FAILED, supervise
from model.config import JobConfig
from model.graceful_stop import StopMarker, StopRequest
from model.lease import LeaseLostError
from tests.job.job_helpers import job_config
from tests.job.lease_fakes import ScriptedLease, keeper_that_lost


class FakeQuery:
    """What ``supervise`` uses of a ``StreamingQuery``.

    ``awaitTermination`` returns at once (as if its timeout had passed) and runs
    the action scripted for that poll; a batch is running (``isTriggerActive``)
    for the first ``busy_reads`` reads of ``status``."""

    def __init__(
        self,
        *,
        on_poll: dict[int, Callable[[], None]] | None = None,
        busy_reads: int = 0,
        terminates: bool = False,
        await_raises: Exception | None = None,
        exception: Exception | None = None,
        exception_after_stop: Exception | None = None,
    ) -> None:
        self.on_poll = on_poll or {}
        self.busy_reads = busy_reads
        self.terminates = terminates
        self.await_raises = await_raises
        self._exception = exception
        self._exception_after_stop = exception_after_stop
        self.poll_timeouts: list[float | None] = []
        self.status_reads = 0
        self.stop_calls = 0
        self.batch_running_at_stop: bool | None = None
        self._guard = threading.Lock()

    def awaitTermination(self, timeout: float | None = None) -> bool:  # noqa: N802 (Spark's name)
        self.poll_timeouts.append(timeout)
        action = self.on_poll.get(len(self.poll_timeouts))
        if action is not None:
            action()
        if self.await_raises is not None:
            raise self.await_raises
        return self.terminates

    def _batch_running(self) -> bool:
        return self.status_reads <= self.busy_reads

    @property
    def status(self) -> dict[str, Any]:
        with self._guard:
            self.status_reads += 1
            return {"isTriggerActive": self._batch_running(), "isDataAvailable": True}

    @property
    def isActive(self) -> bool:  # noqa: N802 (Spark's name)
        return self.stop_calls == 0 and not self.terminates

    def stop(self) -> None:
        self.stop_calls += 1
        if self.batch_running_at_stop is None:
            self.batch_running_at_stop = self.status_reads > 0 and self._batch_running()

    def exception(self) -> Exception | None:
        if self.stop_calls and self._exception_after_stop is not None:
            return self._exception_after_stop
        return self._exception


def test_the_fake_has_only_what_a_streaming_query_has() -> None:
    from pyspark.sql.streaming.query import StreamingQuery

    used = ("awaitTermination", "status", "isActive", "stop", "exception")
    assert all(hasattr(StreamingQuery, name) for name in used)
    assert {n for n in vars(FakeQuery) if not n.startswith("_")} == set(used)


def _config(**overrides: Any) -> JobConfig:
    settings: dict[str, Any] = {"trigger_interval_sec": 1, "stop_poll_interval_sec": 1}
    settings.update(overrides)
    return job_config(database="d", bootstrap="b:1", **settings)


@pytest.fixture
def job_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="job.driver")
    return caplog


def test_a_stop_request_waits_for_the_running_batch_then_exits_0(
    job_log: pytest.LogCaptureFixture,
) -> None:
    stop = StopRequest()
    query = FakeQuery(on_poll={3: lambda: stop.request("signal SIGTERM")}, busy_reads=4)
    config = _config()

    assert supervise(query, config, stop=stop) == EXIT_OK

    assert query.poll_timeouts == [config.stop_poll_interval_sec] * 3
    assert query.stop_calls == 1
    assert query.status_reads > 4, "the batch running when the request came was waited for"
    assert query.batch_running_at_stop is False
    assert "stop requested (signal SIGTERM): stopping between batches" in job_log.text
    assert "stopped gracefully" in job_log.text


def test_stop_marker_stops_between_batches_and_is_consumed(
    tmp_path: Path, job_log: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "control" / "stop"
    path.parent.mkdir()
    stop = StopRequest()
    query = FakeQuery(on_poll={2: lambda: path.write_text('{"by": "test"}')}, busy_reads=2)
    marker = StopMarker(str(path))

    assert supervise(query, _config(), stop=stop, marker=marker) == EXIT_OK

    assert len(query.poll_timeouts) == 2, "seen on the first poll after it appeared"
    assert stop.reason == f"stop marker {path}"
    assert query.stop_calls == 1 and query.batch_running_at_stop is False
    assert not path.exists(), "consumed, so the next version can start"
    assert f"stop requested (stop marker {path})" in job_log.text


def test_a_signal_does_not_consume_a_marker_it_did_not_read(tmp_path: Path) -> None:
    path = tmp_path / "stop"
    stop = StopRequest()
    stop.request("signal SIGINT")
    query = FakeQuery(on_poll={1: lambda: path.write_text("")})

    assert supervise(query, _config(), stop=stop, marker=StopMarker(str(path))) == EXIT_OK
    assert stop.reason == "signal SIGINT"
    assert path.exists()


def test_a_lost_lease_stops_at_once_mid_batch_with_exit_4(
    job_log: pytest.LogCaptureFixture,
) -> None:
    # Found taken on the second renewal.
    lease = ScriptedLease(
        [None, LeaseLostError("lease s3://b/cp/_lease was taken by another copy")]
    )
    keeper = keeper_that_lost(lease)
    stop = StopRequest()
    query = FakeQuery(busy_reads=1_000)

    assert supervise(query, _config(), stop=stop, keeper=keeper) == EXIT_LEASE_LOST

    assert lease.renewals == 2
    assert query.stop_calls == 1
    assert query.status_reads == 0, "no wait for the running batch: another copy writes"
    assert (
        "lease lost, stopping at once: lease s3://b/cp/_lease was taken by another copy"
        in job_log.text
    )


def test_a_failed_batch_exits_1_with_the_cause_bounded(job_log: pytest.LogCaptureFixture) -> None:
    cause = "KafkaDeliveryError: 1 of 1 failure records not delivered " + "x" * 5_000
    query = FakeQuery(on_poll={}, await_raises=RuntimeError(cause))

    assert supervise(query, _config(), stop=StopRequest()) == EXIT_QUERY_FAILED

    [record] = [r for r in job_log.records if r.levelno == logging.ERROR]
    message = record.getMessage()
    assert message.startswith("query failed, stopping the job: KafkaDeliveryError: 1 of 1")
    assert message.endswith(" ...") and len(message) < 4_100


@pytest.mark.parametrize(
    ("exception", "logged"),
    [
        (None, "query terminated without a stop request or an error"),
        (RuntimeError("stream vanished"), "query failed, stopping the job: stream vanished"),
    ],
)
def test_a_query_that_ends_by_itself_exits_1(
    exception: Exception | None, logged: str, job_log: pytest.LogCaptureFixture
) -> None:
    query = FakeQuery(terminates=True, exception=exception)

    assert supervise(query, _config(), stop=StopRequest()) == EXIT_QUERY_FAILED

    assert len(query.poll_timeouts) == 1
    assert logged in job_log.text


def test_a_batch_failing_while_stopping_exits_1(job_log: pytest.LogCaptureFixture) -> None:
    stop = StopRequest()
    stop.request("signal SIGTERM")
    query = FakeQuery(exception_after_stop=RuntimeError("batch 7 failed"))

    assert supervise(query, _config(), stop=stop) == EXIT_QUERY_FAILED

    assert query.stop_calls == 1
    assert "query failed while stopping: batch 7 failed" in job_log.text
    assert "stopped gracefully" not in job_log.text


def test_the_wait_for_a_running_batch_is_bounded_by_the_graceful_timeout() -> None:
    stop = StopRequest()
    stop.request("signal SIGTERM")
    query = FakeQuery(busy_reads=10**9)  # the batch never ends

    assert supervise(query, _config(graceful_stop_timeout_sec=1), stop=stop) == EXIT_OK

    assert query.stop_calls == 1
    assert query.batch_running_at_stop is True, "interrupted: it is replayed on the next start"
