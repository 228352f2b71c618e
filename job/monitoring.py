"""Per-batch delay metrics to CloudWatch, from a ``StreamingQueryListener``.

The incident this answers: a 10-second micro-batch ran minutes late for hours
and the only alarm watched "0 records". So every batch publishes how long it
took against its trigger, how old its oldest record was, the source lag when
the source reports one, and a heartbeat whose absence is itself an alarm.

Publishing never stops the query: the listener only enqueues into a bounded
buffer (oldest data points are dropped, and counted, when CloudWatch is away
for long), and one background thread sends batches of data points with a
bounded timeout and bounded retries. Failures are logged and counted.
Metric names and the dimension come from :mod:`model.contract`, shared with the
alarms.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from job.micro_batch import BatchResult
from model import contract

log = logging.getLogger(__name__)

# Source metrics that mean "how far behind the newest record we are", in ms
# (names used by Kinesis sources that implement ReportsSourceMetrics). A source
# that reports none of them (the Python source today) gets no SourceLagMs.
SOURCE_LAG_KEYS: Final = ("maxMsBehindLatest", "avgMsBehindLatest", "millisBehindLatest", "lagMs")
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


class UndeclaredKeySeries:
    """Which undeclared keys get a ``UndeclaredKeyRecords`` series of their
    own: the first ``limit`` (:data:`model.contract.UNDECLARED_KEY_SERIES`) the
    instance sees, in the order it sees them; every later key is counted
    under :data:`model.contract.OTHER_KEYS`. So at most ``limit + 1`` series
    per instance, however many keys producers invent (the table keeps every
    key, :mod:`job.undeclared`). The names survive a restart through
    ``store`` (:class:`KeySeriesFile`), written only when a name is added.
    Thread-safe: the listener bus calls it."""

    def __init__(
        self,
        named: Sequence[str] = (),
        *,
        limit: int = contract.UNDECLARED_KEY_SERIES,
        store: KeySeriesFile | None = None,
    ) -> None:
        self.limit = limit
        self._named: dict[str, None] = dict.fromkeys(
            [n for n in named if n != contract.OTHER_KEYS][:limit]
        )
        self._store = store
        self._lock = threading.Lock()

    @classmethod
    def stored(cls, checkpoint_location: str, s3_client: Any = None) -> UndeclaredKeySeries:
        store = KeySeriesFile(contract.key_series_path(checkpoint_location), s3_client)
        return cls(store.load(), store=store)

    @property
    def named(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._named)

    def datums(self, counts: Sequence[tuple[str, int]], now: datetime) -> list[Datum]:
        """One ``UndeclaredKeyRecords`` data point per series the batch's keys
        fall in (most frequent first in ``counts``, so a batch that meets more
        new keys than free names names its most frequent ones)."""
        totals: dict[str, int] = {}
        added = False
        with self._lock:
            for key, count in counts:
                value = contract.key_dimension_value(key)
                if value not in self._named and len(self._named) < self.limit:
                    self._named[value] = None
                    added = True
                series = value if value in self._named else contract.OTHER_KEYS
                totals[series] = totals.get(series, 0) + count
            named = tuple(self._named)
        if added and self._store is not None:
            self._store.save(named)
        return [
            Datum(contract.UNDECLARED_KEY_RECORDS, float(count), "Count", now, key=key)
            for key, count in totals.items()
        ]


class KeySeriesFile:
    """The named keys as a JSON list beside the checkpoint's lease (a local
    file or an S3 object). Best effort both ways: a store that cannot be read
    starts the names afresh, one that cannot be written is logged."""

    def __init__(self, path: str, s3_client: Any = None) -> None:
        self.path = path
        self._s3 = s3_client

    def load(self) -> list[str]:
        from model.storage_uri import is_s3, local_path, parse_s3_uri

        try:
            if is_s3(self.path):
                bucket, key = parse_s3_uri(self.path)
                body = self._s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            else:
                from pathlib import Path

                body = Path(local_path(self.path)).read_bytes()
            names = json.loads(body)
        except Exception as exc:  # absent (a new instance) or unreadable
            log.info("undeclared key series: none kept at %s (%s)", self.path, type(exc).__name__)
            return []
        if not isinstance(names, list):
            return []
        return [str(n) for n in names]

    def save(self, names: Sequence[str]) -> None:
        from model.storage_uri import is_s3, local_path, parse_s3_uri

        body = json.dumps(list(names)).encode("utf-8")
        try:
            if is_s3(self.path):
                bucket, key = parse_s3_uri(self.path)
                self._s3.put_object(Bucket=bucket, Key=key, Body=body)
            else:
                from pathlib import Path

                target = Path(local_path(self.path))
                target.parent.mkdir(parents=True, exist_ok=True)
                temporary = target.with_name(target.name + ".tmp")
                temporary.write_bytes(body)
                temporary.replace(target)
        except Exception as exc:  # the names in memory still bound this run
            log.warning("could not keep the undeclared key series at %s: %s", self.path, exc)


def undeclared_key_datums(
    counts: Sequence[tuple[str, int]], now: datetime, series: UndeclaredKeySeries | None = None
) -> list[Datum]:
    """``UndeclaredKeyRecords`` of one batch: by name for the named keys, the
    rest under ``(other)`` (:class:`UndeclaredKeySeries`; a fresh one, naming
    the batch's first keys, when none is given). Keys CloudWatch cannot name
    share one name (:func:`model.contract.key_dimension_value`)."""
    return (series or UndeclaredKeySeries()).datums(counts, now)


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
        from model.aws_clients import ClientLimits, client

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
    """A ``StreamingQueryListener`` (built lazily: importing pyspark is heavy).
    ``key_series``: which undeclared keys are published by name, kept for
    the whole run (default: a fresh one, the first keys of the run)."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

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
