"""scripts.status.metrics: the job's batch metrics and the stack's alarms read
back from CloudWatch (in-process moto)."""

from __future__ import annotations

from datetime import timedelta

import boto3

from job.cloudwatch import Datum, metric_data
from job.monitoring import progress_datums
from model import contract
from scripts.status.metrics import (
    MetricsWindow,
    alarm_prefix,
    metric_query,
    points,
    read_alarms,
    read_batches,
    rows_from_results,
)
from tests.scripts.local_runs import INSTANCE, NOW, REGION

# ------------------------------------------------------------------ metrics, alarms


def test_metric_results_merge_into_rows_of_batches() -> None:
    t = [NOW + timedelta(seconds=i) for i in range(4)]
    results = [
        {"Id": "batches", "Timestamps": [t[3], t[2], t[1], t[0]], "Values": [1.0, 0.0, 1.0, 1.0]},
        {"Id": "duration_ms", "Timestamps": [t[3], t[2], t[1]], "Values": [30.0, 99.0, 20.0]},
    ]
    rows = rows_from_results(results, last=2)
    assert [r.at for r in rows] == [t[1], t[3]]  # no batch in t[2]; t[0] is older
    assert rows[0].values == {"batches": 1.0, "duration_ms": 20.0}
    assert rows_from_results(results, last=0) == []


def test_batches_are_read_back_as_the_job_publishes_them(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    published = [NOW - timedelta(seconds=s) for s in (30, 20, 10)]
    for i, at in enumerate(published):
        progress = {"durationMs": {"triggerExecution": 1000 + i}, "numInputRows": 10 * (i + 1)}
        datums = progress_datums(progress, trigger_interval_sec=2, result=None, now=at)
        cloudwatch.put_metric_data(
            Namespace=contract.metric_namespace(INSTANCE), MetricData=metric_data(datums, INSTANCE)
        )
    idle = Datum(contract.HEARTBEAT, 1.0, "Count", NOW - timedelta(seconds=5))
    cloudwatch.put_metric_data(
        Namespace=contract.metric_namespace(INSTANCE), MetricData=metric_data([idle], INSTANCE)
    )
    window = MetricsWindow(now=NOW, minutes=5, period_sec=1)
    rows = read_batches(cloudwatch, INSTANCE, window, last=2)
    assert [r.values["duration_ms"] for r in rows] == [1001.0, 1002.0]
    assert [r.values["input_rows"] for r in rows] == [20.0, 30.0]
    assert all(r.values["batches"] == 1.0 for r in rows)
    every = read_batches(cloudwatch, INSTANCE, window, last=10)
    assert len(every) == 3  # the idle heartbeat is not a batch


def test_alarms_are_the_stacks_own(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    stack = contract.stack_name("orders", REGION)
    for name in (f"{stack}-FallingBehind", f"{stack}-HeartbeatMissing", "other-FallingBehind"):
        cloudwatch.put_metric_alarm(
            AlarmName=name, MetricName=contract.HEARTBEAT,
            Namespace=contract.metric_namespace(INSTANCE),
            Statistic="Sum", Period=60, EvaluationPeriods=1, Threshold=1,
            ComparisonOperator="LessThanThreshold",
        )  # fmt: skip
    for name, state in (("HeartbeatMissing", "ALARM"), ("FallingBehind", "OK")):
        cloudwatch.set_alarm_state(AlarmName=f"{stack}-{name}", StateValue=state, StateReason="t")
    found = read_alarms(cloudwatch, stack)
    assert [(a.name, a.state) for a in found] == [
        (f"{stack}-HeartbeatMissing", "ALARM"),
        (f"{stack}-FallingBehind", "OK"),
    ]
    assert alarm_prefix(stack) == "Streaming-orders-ap-northeast-2-"


def test_one_query_shape_serves_the_columns_and_the_undeclared_keys() -> None:
    """status and undeclared build their GetMetricData queries with metric_query."""
    plain = metric_query("batches", INSTANCE, contract.BATCH_DURATION_MS, "SampleCount", 60)
    assert plain["Id"] == "batches"
    assert plain["MetricStat"]["Period"] == 60 and plain["MetricStat"]["Stat"] == "SampleCount"
    assert plain["MetricStat"]["Metric"]["Dimensions"] == contract.dimensions(INSTANCE)
    keyed = metric_query("k0", INSTANCE, contract.UNDECLARED_KEY_RECORDS, "Sum", 60, key="extra")
    assert {"Name": contract.KEY_DIMENSION, "Value": "extra"} in (
        keyed["MetricStat"]["Metric"]["Dimensions"]
    )
    assert keyed["MetricStat"]["Metric"]["Namespace"] == contract.metric_namespace(INSTANCE)


def test_points_pairs_timestamps_with_float_values() -> None:
    later = NOW + timedelta(minutes=1)
    assert points({"Id": "x", "Timestamps": [NOW, later], "Values": [1, 2.5]}) == [
        (NOW, 1.0),
        (later, 2.5),
    ]
    assert points({"Id": "x"}) == []
