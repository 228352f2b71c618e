"""infra/constructs/metrics.py: the job's metrics by the names, namespace and
dimensions the job publishes with (model.contract), the stream's iterator age
in their place, and a search over the undeclared keys at the alarm period."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cw

from infra.constructs.metrics import ITERATOR_AGE, InstanceMetrics
from model import contract

AGE = cw.Metric(namespace="AWS/Kinesis", metric_name=ITERATOR_AGE, statistic="Maximum")
METRICS = InstanceMetrics("Streaming", "orders-eu-west-1", cdk.Duration.minutes(5), AGE)


def test_a_job_metric_carries_the_instance_dimension_and_the_period() -> None:
    metric = METRICS.metric(contract.UNDECLARED_KEY_RECORDS, "Sum", label="undeclared")
    assert isinstance(metric, cw.Metric)
    assert (metric.namespace, metric.metric_name, metric.statistic) == (
        "Streaming",
        contract.UNDECLARED_KEY_RECORDS,
        "Sum",
    )
    assert metric.dimensions == {contract.INSTANCE_DIMENSION: "orders-eu-west-1"}
    assert metric.period.to_seconds() == 300 and metric.label == "undeclared"


def test_the_iterator_age_is_the_streams_own_metric() -> None:
    assert METRICS.metric(ITERATOR_AGE, "Average") is AGE


def test_failures_by_reason_add_the_reason_dimension() -> None:
    metric = METRICS.by_reason("bad_json")
    assert isinstance(metric, cw.Metric)
    assert metric.metric_name == contract.FAILURE_RECORDS_BY_REASON
    assert metric.dimensions == {
        contract.INSTANCE_DIMENSION: "orders-eu-west-1",
        contract.REASON_DIMENSION: "bad_json",
    }


def test_undeclared_keys_are_one_search_over_this_instance_at_the_period() -> None:
    search = METRICS.undeclared_keys()
    assert isinstance(search, cw.SearchExpression)
    assert search.expression == (
        'SEARCH(\'{Streaming,Instance,Key} MetricName="UndeclaredKeyRecords" '
        "Instance=\"orders-eu-west-1\"', 'Sum', 300)"
    )
