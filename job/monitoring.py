"""Per-batch delay metrics to CloudWatch, from a ``StreamingQueryListener``.

The incident this answers: a 10-second micro-batch ran minutes late for hours
and the only alarm watched "0 records". So every batch publishes how long it
took against its trigger, how old its oldest record was, the source lag when
the source reports one, and a heartbeat whose absence is itself an alarm.

Publishing never stops the query: the listener only hands the data points
to :class:`job.cloudwatch.CloudWatchPublisher`, which sends them from a thread
of its own, bounded. Metric names and the dimension come from
:mod:`model.contract`, shared with the alarms; which undeclared keys are named
is :mod:`job.key_series`.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from pyspark.sql.streaming.listener import StreamingQueryListener

from job.cloudwatch import CloudWatchPublisher, Datum
from job.key_series import UndeclaredKeySeries, undeclared_key_datums
from job.micro_batch import BatchResult
from model import contract

log = logging.getLogger(__name__)

# Source metrics that mean "how far behind the newest record we are", in ms
# (names used by Kinesis sources that implement ReportsSourceMetrics). A source
# that reports none of them (the Python source today) gets no SourceLagMs.
SOURCE_LAG_KEYS: Final = ("maxMsBehindLatest", "avgMsBehindLatest", "millisBehindLatest", "lagMs")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def source_lag_ms(progress: Mapping[str, Any]) -> float | None:
    """The largest lag any source reports, or None when none reports one."""
    lags: list[float] = []
    for source in progress.get("sources") or ():
        metrics = source.get("metrics") or {}
        for key in SOURCE_LAG_KEYS:
            value = _number(metrics.get(key))
            if value is not None:
                lags.append(value)
    return max(lags) if lags else None


def batch_start_ms(progress: Mapping[str, Any]) -> float | None:
    """The batch's start (``timestamp`` of the progress event) in epoch ms."""
    stamp = progress.get("timestamp")
    if not isinstance(stamp, str):
        return None
    try:
        parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed.timestamp() * 1000.0


def scheduling_delay_ms(
    previous: tuple[float, float] | None, start_ms: float | None, interval_ms: float
) -> float:
    """How long a batch waited past its trigger tick for the previous batch.

    Spark plans a processing-time batch on the first tick after the previous
    batch started; if the previous batch (``(start_ms, duration_ms)``) was
    still running then, this one starts when it ends, that much late. A
    batch after idle ticks, or after a batch that fit its interval, waited 0.
    """
    if previous is None or start_ms is None:
        return 0.0
    prev_start, prev_duration = previous
    tick = (prev_start // interval_ms + 1) * interval_ms
    return max(0.0, min(start_ms, prev_start + prev_duration) - tick)


def scheduling_delay_ratio(
    previous: tuple[float, float] | None,
    start_ms: float | None,
    duration_ms: float,
    interval_ms: float,
) -> float:
    """Share of the batch's latency (delay + duration) spent waiting to start."""
    delay = scheduling_delay_ms(previous, start_ms, interval_ms)
    total = delay + duration_ms
    return delay / total if total > 0 else 0.0


def progress_datums(
    progress: Mapping[str, Any],
    *,
    trigger_interval_sec: int,
    result: BatchResult | None,
    now: datetime,
    previous: tuple[float, float] | None = None,
    key_series: UndeclaredKeySeries | None = None,
) -> list[Datum]:
    """The data points for one ``QueryProgressEvent`` (progress as parsed JSON).

    ``SchedulingDelayRatio`` is the share of the batch's latency spent waiting
    to start: its scheduling delay (see :func:`scheduling_delay_ms`, which needs
    the ``previous`` batch's start and duration) over delay plus duration. 0
    while batches start on their trigger tick; it climbs towards 1 when each
    batch queues behind the last (docs/design.md, "Incidents": the 10 s batch running 3
    minutes late). The batch-duration alarm covers "slower than the trigger".
    ``EndToEndLatencyMs`` is ``now`` minus the oldest Kinesis arrival time in
    the batch (only for batches that had records).
    """
    duration = _number((progress.get("durationMs") or {}).get("triggerExecution")) or 0.0
    datums = [
        Datum(contract.BATCH_DURATION_MS, duration, "Milliseconds", now),
        Datum(contract.INPUT_ROWS, _number(progress.get("numInputRows")) or 0.0, "Count", now),
        Datum(
            contract.INPUT_ROWS_PER_SECOND,
            _number(progress.get("inputRowsPerSecond")) or 0.0,
            "Count/Second",
            now,
        ),
        Datum(
            contract.PROCESSED_ROWS_PER_SECOND,
            _number(progress.get("processedRowsPerSecond")) or 0.0,
            "Count/Second",
            now,
        ),
        Datum(
            contract.SCHEDULING_DELAY_RATIO,
            scheduling_delay_ratio(
                previous, batch_start_ms(progress), duration, trigger_interval_sec * 1000.0
            ),
            "None",
            now,
        ),
        Datum(
            contract.FAILURE_RECORDS,
            float(result.failure_records if result else 0),
            "Count",
            now,
        ),
        Datum(contract.HEARTBEAT, 1.0, "Count", now),
    ]
    if result is not None and result.oldest_arrival is not None:
        latency = (now - result.oldest_arrival).total_seconds() * 1000.0
        datums.append(Datum(contract.END_TO_END_LATENCY_MS, max(0.0, latency), "Milliseconds", now))
    if result is not None:
        datums.extend(
            Datum(contract.FAILURE_RECORDS_BY_REASON, float(count), "Count", now, reason)
            for reason, count in result.failures_by_reason
        )
        datums.extend(undeclared_key_datums(result.undeclared_keys, now, key_series))
    lag = source_lag_ms(progress)
    if lag is not None:
        datums.append(Datum(contract.SOURCE_LAG_MS, lag, "Milliseconds", now))
    return datums


class BatchResults:
    """Hand-off from ``foreachBatch`` (query thread) to the listener (listener bus)."""

    def __init__(self, limit: int = 100) -> None:
        self._lock = threading.Lock()
        self._results: dict[int, BatchResult] = {}
        self._limit = limit

    def put(self, result: BatchResult) -> None:
        with self._lock:
            self._results[result.batch_id] = result
            while len(self._results) > self._limit:
                self._results.pop(next(iter(self._results)))

    def pop(self, batch_id: int) -> BatchResult | None:
        with self._lock:
            return self._results.pop(batch_id, None)


def make_listener(
    publisher: CloudWatchPublisher,
    results: BatchResults,
    trigger_interval_sec: int,
    clock: Callable[[], datetime] | None = None,
    key_series: UndeclaredKeySeries | None = None,
) -> Any:
    """A ``StreamingQueryListener`` that publishes each batch's metrics.
    ``key_series``: which undeclared keys are published by name, kept for
    the whole run (default: a fresh one, the first keys of the run)."""
    now = clock or (lambda: datetime.now(UTC))
    series = key_series if key_series is not None else UndeclaredKeySeries()
    # (start ms, duration ms) of the last batch, for the scheduling delay.
    last_batch: list[tuple[float, float]] = []

    class MetricsListener(StreamingQueryListener):
        def __init__(self) -> None:
            super().__init__()
            # Set once the termination event was handled. Spark's listener bus
            # delivers a query's events in order, so every progress event (the
            # last batch's too) has been published by then: the job waits for
            # it before it removes the listener, or the last batch's metrics
            # could be lost.
            self.terminated = threading.Event()

        def onQueryStarted(self, event: Any) -> None:  # noqa: N802
            publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", now())])

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802
            try:
                progress = json.loads(event.progress.json)
                result = results.pop(int(progress.get("batchId", -1)))
                publisher.publish(
                    progress_datums(
                        progress,
                        trigger_interval_sec=trigger_interval_sec,
                        result=result,
                        now=now(),
                        previous=last_batch[-1] if last_batch else None,
                        key_series=series,
                    )
                )
                start = batch_start_ms(progress)
                duration = _number((progress.get("durationMs") or {}).get("triggerExecution"))
                if start is not None and duration is not None:
                    last_batch[:] = [(start, duration)]
            except Exception:  # a metrics bug must not take the listener bus down
                log.exception("could not turn query progress into metrics")

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802
            publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", now())])

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
            publisher.flush()
            self.terminated.set()

    return MetricsListener()
