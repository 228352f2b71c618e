"""local/metrics.py: reading an instance's per-batch metrics back from
CloudWatch (in-process moto) within GetMetricStatistics' per-call limit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import boto3
from moto import mock_aws

from local.metrics import MAX_POINTS_PER_CALL, published, read_series, windows
from model import contract


def test_read_series_returns_every_batchs_point() -> None:
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=5)
    with mock_aws():
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        for offset, duration, rows in ((1, 900.0, 10.0), (3, 2500.0, 20.0), (5, 1200.0, 0.0)):
            stamp = start + timedelta(seconds=offset)
            cloudwatch.put_metric_data(
                Namespace=contract.metric_namespace("orders-r"),
                MetricData=[
                    {
                        "MetricName": name,
                        "Dimensions": contract.dimensions("orders-r"),
                        "Timestamp": stamp,
                        "Value": value,
                    }
                    for name, value in (
                        (contract.BATCH_DURATION_MS, duration),
                        (contract.INPUT_ROWS, rows),
                    )
                ],
            )
        series = read_series(cloudwatch, "orders-r", start, start + timedelta(seconds=10))
        other = read_series(cloudwatch, "payments-r", start, start + timedelta(seconds=10))
    durations = series[contract.BATCH_DURATION_MS]
    assert [p.maximum for p in durations] == [900.0, 2500.0, 1200.0]
    assert [p.count for p in durations] == [1.0, 1.0, 1.0]
    assert sum(p.total for p in series[contract.INPUT_ROWS]) == 30.0
    assert series[contract.SOURCE_LAG_MS] == ()
    # The other instance's namespace was asked for every metric, and holds none.
    assert set(other) == set(series) and contract.BATCH_DURATION_MS in other
    assert all(points == () for points in other.values())
    summary = published(series)
    assert summary.batch_durations_ms == (900.0, 2500.0, 1200.0)
    assert summary.datapoints == 6


def test_windows_stay_within_the_per_call_limit() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    spans = list(windows(start, start + timedelta(seconds=3000), 1))
    assert [(b - a).total_seconds() for a, b in spans] == [
        MAX_POINTS_PER_CALL,
        MAX_POINTS_PER_CALL,
        120,
    ]
    assert spans[0][0] == start and spans[-1][1] == start + timedelta(seconds=3000)
