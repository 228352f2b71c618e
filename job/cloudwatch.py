"""The job's CloudWatch data points and the publisher that sends them.

Publishing never stops the query: :meth:`CloudWatchPublisher.publish` only
enqueues into a bounded buffer (oldest data points are dropped, and counted,
when CloudWatch is away for long), and one background thread sends batches of
data points with a bounded timeout and bounded retries. Failures are logged
and counted. Metric names and the dimensions come from :mod:`model.contract`,
shared with the alarms; :mod:`job.monitoring` turns each batch's progress
into data points.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from model import contract
from model.aws_clients import ClientLimits, client

log = logging.getLogger(__name__)

# Data points the sender puts in one PutMetricData call, and kept in the buffer.
MAX_DATUMS_PER_CALL: Final = 500
BUFFER_LIMIT: Final = 10_000


@dataclass(frozen=True)
class Datum:
    """One CloudWatch data point, as queued for the sender thread
    (:func:`metric_data` adds the instance dimension when it is sent)."""

    name: str
    value: float
    unit: str
    timestamp: datetime
    # The Reason dimension (FailureRecordsByReason only).
    reason: str | None = None
    # The Key dimension (UndeclaredKeyRecords only).
    key: str | None = None


def metric_data(datums: list[Datum], instance: str) -> list[dict[str, Any]]:
    """``put_metric_data`` payload entries, with the instance dimension."""
    return [
        {
            "MetricName": d.name,
            "Dimensions": contract.dimensions(instance, d.reason, d.key),
            "Timestamp": d.timestamp,
            "Value": d.value,
            "Unit": d.unit,
        }
        for d in datums
    ]


class CloudWatchPublisher:
    """Bounded buffer + one sender thread. ``publish`` never blocks or raises;
    ``flush`` and ``close`` return within their ``timeout`` even when a call
    to CloudWatch hangs (all sending happens on the sender thread, so a waiter
    can give up on it)."""

    def __init__(
        self,
        instance: str,
        put_metric_data: Callable[..., Any],
        *,
        flush_interval_sec: float = 5.0,
        buffer_limit: int = BUFFER_LIMIT,
    ) -> None:
        self.instance = instance
        self._put = put_metric_data
        self._interval = flush_interval_sec
        self._buffer: deque[Datum] = deque()
        self._limit = buffer_limit
        self._wake = threading.Condition()
        self._closed = False
        # Positions in the stream of published data points: how many were
        # published, how many are settled (sent, failed or overflowed), and the
        # end of the last chunk a failed call dropped. ``flush`` compares them.
        self._published_upto = 0
        self._settled_upto = 0
        self._failed_upto = 0
        self.published = 0
        self.failed_calls = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="cloudwatch-publisher", daemon=True)
        self._thread.start()

    @classmethod
    def for_config(
        cls,
        instance: str,
        region: str,
        endpoint_url: str | None,
        timeout_sec: int,
        max_attempts: int,
    ) -> CloudWatchPublisher:
        """``timeout_sec`` bounds connect and read; ``max_attempts`` is the
        retry count (``metrics.max_attempts``, botocore's meaning)."""
        limits = ClientLimits(
            connect_timeout_sec=timeout_sec, read_timeout_sec=timeout_sec, retries=max_attempts
        )
        cloudwatch = client("cloudwatch", limits, region=region, endpoint_url=endpoint_url)
        return cls(instance, cloudwatch.put_metric_data)

    def publish(self, datums: list[Datum]) -> None:
        with self._wake:
            if self._closed:
                self.dropped += len(datums)
                return
            self._buffer.extend(datums)
            self._published_upto += len(datums)
            overflow = len(self._buffer) - self._limit
            for _ in range(max(0, overflow)):
                self._buffer.popleft()
            if overflow > 0:
                self.dropped += overflow
            self._wake.notify_all()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait (at most ``timeout`` seconds) until what was published before
        this call is sent. True when all of it reached CloudWatch; False when a
        call failed (those data points are dropped and counted) or time ran out
        (they stay buffered)."""
        with self._wake:
            target = self._published_upto
            start = self._settled_upto
            self._wake.notify_all()
            settled = self._wake.wait_for(
                lambda: self._settled_upto >= target or not self._thread.is_alive(), timeout
            )
            return bool(settled) and self._settled_upto >= target and self._failed_upto <= start

    def close(self, timeout: float = 10.0) -> None:
        """Send what is buffered and stop the sender, waiting at most ``timeout``
        seconds; a sender stuck in a call is left behind (a daemon thread)."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._wake:
                unsent = self._published_upto - self._settled_upto
            log.warning(
                "CloudWatch publisher did not finish within %ss; %d data points unsent",
                timeout,
                unsent,
            )

    def _run(self) -> None:
        while True:
            with self._wake:
                self._wake.wait_for(lambda: self._closed or bool(self._buffer), self._interval)
                closing = self._closed
            self._send_all()
            if closing:
                return

    def _take(self) -> tuple[list[Datum], int]:
        """The next chunk and the stream position it ends at."""
        with self._wake:
            count = min(MAX_DATUMS_PER_CALL, len(self._buffer))
            chunk = [self._buffer.popleft() for _ in range(count)]
            end = self._published_upto - len(self._buffer)
            if not chunk:
                self._settled_upto = end  # only overflowed points were left
                self._wake.notify_all()
            return chunk, end

    def _settle(self, end: int, *, failed: bool) -> None:
        with self._wake:
            self._settled_upto = max(self._settled_upto, end)
            if failed:
                self._failed_upto = end
            self._wake.notify_all()

    def _send_all(self) -> bool:
        """Send the buffer chunk by chunk; stop at the first failed call."""
        while True:
            chunk, end = self._take()
            if not chunk:
                return True
            try:
                self._put(
                    Namespace=contract.metric_namespace(self.instance),
                    MetricData=metric_data(chunk, self.instance),
                )
                self.published += len(chunk)
            except Exception as exc:  # an outage must never reach the query
                self.failed_calls += 1
                self.dropped += len(chunk)
                self._settle(end, failed=True)
                log.warning(
                    "CloudWatch put_metric_data failed (%d data points dropped, %d failed calls "
                    "so far): %s: %s",
                    len(chunk),
                    self.failed_calls,
                    type(exc).__name__,
                    exc,
                )
                return False
            self._settle(end, failed=False)
