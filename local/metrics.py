"""What the job published to CloudWatch (moto), read back for the summary and the report.

One ``GetMetricStatistics`` call per metric and window returns, per period,
SampleCount, Sum and Maximum. moto keeps every datapoint, so with a 1-second
period each batch's figures are one point (batches are seconds apart), which
is what the summary's p50/p99 and the report's charts need. Real CloudWatch
keeps metrics published without ``StorageResolution`` at 60-second resolution
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricStatistics.html),
so a reader against AWS passes ``period_sec`` 60 or more.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from local.metrics_dump import MetricPoint
from model import aws_clients, contract
from producer.local_run import emulator_client

READER_LIMITS: Final = aws_clients.ClientLimits(
    connect_timeout_sec=5, read_timeout_sec=30, retries=3
)
# "The maximum number of data points returned from a single call is 1,440";
# longer ranges are read as adjacent windows. Data points come back in no
# particular order, hence the sort.
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricStatistics.html
MAX_POINTS_PER_CALL: Final = 1440
STATISTICS: Final = ("SampleCount", "Sum", "Maximum")
# Publishing stamps a batch's data points with the listener's clock; the
# window is widened by this much so a point at either edge is not lost.
EDGE: Final = timedelta(seconds=2)


@dataclass(frozen=True)
class PublishedMetrics:
    datapoints_by_metric: dict[str, int] = field(default_factory=dict)
    batch_durations_ms: tuple[float, ...] = ()

    @property
    def datapoints(self) -> int:
        return sum(self.datapoints_by_metric.values())


def cloudwatch_client(region: str, endpoint_url: str) -> Any:
    """A client for the emulator (fake credentials, bounded timeouts)."""
    return emulator_client("cloudwatch", READER_LIMITS, region, endpoint_url)


def windows(start: datetime, end: datetime, period_sec: int) -> Iterator[tuple[datetime, datetime]]:
    """Adjacent ``[from, to)`` windows of at most :data:`MAX_POINTS_PER_CALL` periods."""
    if period_sec < 1:
        raise ValueError(f"period_sec={period_sec}: must be at least 1")
    span = timedelta(seconds=period_sec * MAX_POINTS_PER_CALL)
    cursor = start
    while cursor < end:
        upto = min(end, cursor + span)
        yield cursor, upto
        cursor = upto


def _point(raw: dict[str, Any]) -> MetricPoint:
    return MetricPoint(
        at=raw["Timestamp"].astimezone(UTC),
        count=float(raw.get("SampleCount", 0.0)),
        total=float(raw.get("Sum", 0.0)),
        maximum=float(raw.get("Maximum", 0.0)),
    )


def read_series(
    client: Any,
    instance: str,
    start: datetime,
    end: datetime,
    *,
    period_sec: int = 1,
    metrics: Sequence[str] = contract.ALL_METRICS,
) -> dict[str, tuple[MetricPoint, ...]]:
    """Per metric, its points in ``[start - EDGE, end + EDGE)``, oldest first."""
    out: dict[str, tuple[MetricPoint, ...]] = {}
    for metric in metrics:
        points: list[MetricPoint] = []
        for since, upto in windows(start - EDGE, end + EDGE, period_sec):
            response = client.get_metric_statistics(
                Namespace=contract.metric_namespace(instance),
                MetricName=metric,
                Dimensions=contract.dimensions(instance),
                StartTime=since,
                EndTime=upto,
                Period=period_sec,
                Statistics=list(STATISTICS),
            )
            points.extend(_point(p) for p in response.get("Datapoints", []))
        out[metric] = tuple(sorted(points, key=lambda p: p.at))
    return out


def published(series: dict[str, tuple[MetricPoint, ...]]) -> PublishedMetrics:
    """The summary's figures from the series: data points per metric and the
    slowest batch of each period."""
    counts = {m: int(sum(p.count for p in series.get(m, ()))) for m in contract.ALL_METRICS}
    durations = tuple(p.maximum for p in series.get(contract.BATCH_DURATION_MS, ()))
    return PublishedMetrics(counts, durations)


def read_published(client: Any, instance: str, start: datetime, end: datetime) -> PublishedMetrics:
    """Datapoints per metric and batch durations in [start, end)."""
    return published(read_series(client, instance, start, end))
