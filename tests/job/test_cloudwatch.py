"""``job.cloudwatch``: the data points' payload, and the publisher's bounded
buffer, timeouts and outage handling (no JVM)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from job.cloudwatch import CloudWatchPublisher, Datum, metric_data
from local.emulators import free_port
from model import contract
from model.polling import wait_for

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_metric_data_carries_the_instance_dimension() -> None:
    data = metric_data([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)], "orders-eu-west-1")
    assert data[0]["Dimensions"] == [{"Name": "Instance", "Value": "orders-eu-west-1"}]


def test_publisher_batches_and_bounds_the_buffer() -> None:
    calls: list[int] = []
    publisher = CloudWatchPublisher(
        "i",
        lambda **kw: calls.append(len(kw["MetricData"])),
        flush_interval_sec=60,
        buffer_limit=700,
    )
    try:
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)] * 1000)
        assert publisher.flush()
    finally:
        publisher.close()
    assert publisher.dropped == 300
    assert sum(calls) == 700 and max(calls) <= 500


def _returns_within(seconds: float, call: Callable[[], object]) -> object:
    """``call()`` on a helper thread; fails (instead of hanging) if it outlives ``seconds``."""
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds}s"
    return outcome[0]


def test_flush_and_close_honour_their_timeout_when_a_put_hangs() -> None:
    release = threading.Event()
    calls: list[int] = []

    def hanging_put(**kw: Any) -> None:
        calls.append(len(kw["MetricData"]))
        release.wait(30)

    publisher = CloudWatchPublisher("i", hanging_put, flush_interval_sec=60)
    try:
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
        assert wait_for(lambda: calls, timeout=5, interval=0.01), "the first put never started"
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)] * 2)  # queued behind it
        started = time.monotonic()
        assert _returns_within(3, lambda: publisher.flush(timeout=0.5)) is False
        assert _returns_within(3, lambda: publisher.close(timeout=0.5)) is None
        assert time.monotonic() - started < 2.5, "flush + close took longer than their bounds"
        assert calls == [1], "one call in flight, none started by the waiters"
    finally:
        release.set()
    publisher.close(timeout=5)  # the call returned: the sender sends the rest and ends
    assert publisher.published == 3, "the hung call and the queued points are sent after all"


def test_flush_reports_whether_what_was_pending_reached_cloudwatch() -> None:
    failing = threading.Event()

    def put(**_kw: Any) -> None:
        if failing.is_set():
            raise ConnectionError("CloudWatch away")

    publisher = CloudWatchPublisher("i", put, flush_interval_sec=60)
    try:
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
        assert publisher.flush(timeout=5) is True
        failing.set()
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)] * 3)
        assert publisher.flush(timeout=5) is False
        failing.clear()
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
        assert publisher.flush(timeout=5) is True, "an earlier outage does not fail a later flush"
        assert publisher.flush(timeout=5) is True, "nothing pending: flushed"
    finally:
        publisher.close(timeout=5)
    assert (publisher.published, publisher.dropped, publisher.failed_calls) == (2, 3, 1)
    publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
    assert publisher.dropped == 4, "published after close: dropped and counted"


def test_cloudwatch_outage_is_logged_and_counted_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    publisher = CloudWatchPublisher.for_config(
        "i", "us-east-1", dead, timeout_sec=1, max_attempts=2
    )
    with caplog.at_level(logging.WARNING, logger="job.cloudwatch"):
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
        assert publisher.flush() is False
        publisher.close(timeout=5)
    assert publisher.failed_calls >= 1
    assert publisher.published == 0
    assert "CloudWatch put_metric_data failed" in caplog.text
