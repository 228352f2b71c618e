"""The last batches' figures and the alarm states, from CloudWatch.

The job publishes one data point per metric per batch (:mod:`job.monitoring`,
names from :mod:`model.contract`) without a ``StorageResolution``, so on AWS
they are standard-resolution metrics: a query period "can be as short as one
minute (60 seconds) and must be a multiple of 60"
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_MetricStat.html).
A row is then one minute of batches: duration and latency are the period's
maximum, rows and failures its sum, rates its average, and ``batches`` the
batch duration's sample count (one per batch; the heartbeat is also sent
when the query starts and while it idles). moto keeps every point, so locally a 1-second
period gives one row per batch.

Alarms are the stack's: each is named ``<stack>-<name>``
(:mod:`infra.constructs.alarms`), so one ``DescribeAlarms`` with
``AlarmNamePrefix`` finds all of them
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_DescribeAlarms.html).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from model import contract

# (column, metric, statistic): what a row of the last batches shows.
COLUMNS: Final = (
    ("batches", contract.BATCH_DURATION_MS, "SampleCount"),
    ("duration_ms", contract.BATCH_DURATION_MS, "Maximum"),
    ("input_rows", contract.INPUT_ROWS, "Sum"),
    ("input_rows_per_sec", contract.INPUT_ROWS_PER_SECOND, "Average"),
    ("processed_rows_per_sec", contract.PROCESSED_ROWS_PER_SECOND, "Average"),
    ("failure_records", contract.FAILURE_RECORDS, "Sum"),
    ("end_to_end_latency_ms", contract.END_TO_END_LATENCY_MS, "Maximum"),
    ("source_lag_ms", contract.SOURCE_LAG_MS, "Maximum"),
    ("scheduling_delay_ratio", contract.SCHEDULING_DELAY_RATIO, "Maximum"),
)


def metric_query(
    query_id: str, instance: str, metric: str, stat: str, period_sec: int, *, key: str | None = None
) -> dict[str, Any]:
    """One GetMetricData query of an instance's ``metric`` (of one undeclared
    ``key`` when given), ``stat`` per ``period_sec``."""
    return {
        "Id": query_id,
        "MetricStat": {
            "Metric": {
                "Namespace": contract.metric_namespace(instance),
                "MetricName": metric,
                "Dimensions": contract.dimensions(instance, key=key),
            },
            "Period": period_sec,
            "Stat": stat,
        },
    }


def points(result: Mapping[str, Any]) -> list[tuple[datetime, float]]:
    """A GetMetricData result's (timestamp, value) pairs."""
    pairs = zip(result.get("Timestamps", []), result.get("Values", []), strict=True)
    return [(stamp, float(value)) for stamp, value in pairs]


def metric_queries(instance: str, period_sec: int) -> list[dict[str, Any]]:
    """GetMetricData queries, one per column; ids are the column names."""
    return [
        metric_query(column, instance, metric, stat, period_sec) for column, metric, stat in COLUMNS
    ]


@dataclass(frozen=True)
class BatchRow:
    """One period of batches (one batch, locally)."""

    at: datetime
    values: dict[str, float]  # column -> value; a metric with no point is absent


def rows_from_results(results: Iterable[Mapping[str, Any]], last: int) -> list[BatchRow]:
    """Merge GetMetricData results into rows by timestamp, oldest first, the
    last ``last`` periods in which a batch ran. Pure."""
    by_time: dict[datetime, dict[str, float]] = {}
    for result in results:
        for stamp, value in points(result):
            by_time.setdefault(stamp, {})[str(result["Id"])] = value
    rows = [BatchRow(at, values) for at, values in sorted(by_time.items()) if values.get("batches")]
    return rows[-last:] if last > 0 else []


@dataclass(frozen=True)
class MetricsWindow:
    """What ``make status`` reads of CloudWatch: the last ``minutes`` before
    ``now``, in points of ``period_sec``; one value for every reader."""

    now: datetime
    minutes: float
    period_sec: int


def metric_data(
    cloudwatch: Any, queries: list[dict[str, Any]], window: MetricsWindow
) -> list[Mapping[str, Any]]:
    """Every page of one ``GetMetricData`` over the window (to one period past
    its ``now``): the results as they come, a query's points possibly split
    over pages."""
    results: list[Mapping[str, Any]] = []
    kwargs: dict[str, Any] = {
        "MetricDataQueries": queries,
        "StartTime": window.now - timedelta(minutes=window.minutes),
        "EndTime": window.now + timedelta(seconds=window.period_sec),
    }
    while True:
        response = cloudwatch.get_metric_data(**kwargs)
        results.extend(response.get("MetricDataResults", []))
        token = response.get("NextToken")
        if not token:
            return results
        kwargs["NextToken"] = token


def read_batches(
    cloudwatch: Any, instance: str, window: MetricsWindow, *, last: int
) -> list[BatchRow]:
    results = metric_data(cloudwatch, metric_queries(instance, window.period_sec), window)
    return rows_from_results(_merge_pages(results), last)


def _merge_pages(results: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A query's points may come in several pages: one result per id."""
    merged: dict[str, dict[str, Any]] = {}
    for result in results:
        empty = {"Id": result["Id"], "Timestamps": [], "Values": []}
        entry = merged.setdefault(str(result["Id"]), empty)
        entry["Timestamps"].extend(result.get("Timestamps", []))
        entry["Values"].extend(result.get("Values", []))
    return list(merged.values())


@dataclass(frozen=True)
class AlarmState:
    name: str
    state: str  # OK | ALARM | INSUFFICIENT_DATA
    since: datetime | None
    reason: str


def alarm_prefix(stack_name: str) -> str:
    """The prefix of every alarm of an instance's stack (``<stack>-<name>``)."""
    return f"{stack_name}-"


def read_alarms(cloudwatch: Any, stack_name: str) -> list[AlarmState]:
    found: list[AlarmState] = []
    pages = cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=alarm_prefix(stack_name), AlarmTypes=["MetricAlarm"]
    )
    for page in pages:
        for alarm in page.get("MetricAlarms", []):
            found.append(
                AlarmState(
                    str(alarm["AlarmName"]),
                    str(alarm.get("StateValue", "?")),
                    alarm.get("StateUpdatedTimestamp"),
                    str(alarm.get("StateReason", "")),
                )
            )
    return sorted(found, key=lambda a: (a.state != "ALARM", a.name))
