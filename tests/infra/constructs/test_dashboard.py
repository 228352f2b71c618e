"""The dashboard of each instance shows what the run report shows (local/report.py).

The body is a CloudFormation ``Fn::Join`` of JSON text and tokens (region,
alarm ARNs); every token sits inside a JSON string, so replacing each with a
placeholder leaves JSON that can be read widget by widget.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.constructs.alarms import FAILURE_RECORDS, FALLING_BEHIND
from model import contract
from model.record import REASONS
from tests.infra.conftest import Synthesized
from tests.infra.stacks.test_templates import ALL

# What the report charts or tabulates, and so the dashboard must show.
REPORT_METRICS = (
    contract.BATCH_DURATION_MS,
    contract.END_TO_END_LATENCY_MS,
    contract.SOURCE_LAG_MS,
    contract.INPUT_ROWS,
    contract.INPUT_ROWS_PER_SECOND,
    contract.PROCESSED_ROWS_PER_SECOND,
    contract.FAILURE_RECORDS,
)


def _body(synthesized: Synthesized, name: str) -> dict[str, Any]:
    (_, dashboard) = synthesized.one(name, "AWS::CloudWatch::Dashboard")
    raw = dashboard["Properties"]["DashboardBody"]
    if isinstance(raw, dict):
        _, parts = raw["Fn::Join"]
        raw = "".join(p if isinstance(p, str) else "TOKEN" for p in parts)
    body: dict[str, Any] = json.loads(raw)
    return body


def _widget(body: dict[str, Any], title: str) -> dict[str, Any]:
    found = [w["properties"] for w in body["widgets"] if w["properties"].get("title") == title]
    assert len(found) == 1, f"one widget titled {title!r}, found {len(found)}"
    return found[0]


def _metrics(widget: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(metric name, statistic, axis, instance) of each of the widget's metric lines."""
    out = []
    for line in widget["metrics"]:
        if isinstance(line[0], dict) and "expression" in line[0]:
            continue  # a search expression (undeclared keys): its own test
        options = line[-1] if isinstance(line[-1], dict) else {}
        names = [x for x in line if isinstance(x, str)]
        namespace, metric = names[0], names[1]
        dims = dict(zip(names[2::2], names[3::2], strict=False))
        instance = dims.get(contract.INSTANCE_DIMENSION, "")
        # The job's metrics are in the namespace of the instance they name.
        assert namespace in (contract.metric_namespace(instance), "AWS/Kinesis"), line
        # A line without "stat" is an Average, the body format's default.
        stat = options.get("stat", "Average")
        out.append((metric, stat, options.get("yAxis", "left"), instance))
    return out


@pytest.mark.parametrize("name", ALL)
def test_dashboard_shows_every_figure_of_the_run_report(
    synthesized: Synthesized, name: str
) -> None:
    body = _body(synthesized, name)
    instance = synthesized.config(name).instance_id
    ours = [
        (metric, dim)
        for widget in body["widgets"]
        if "metrics" in widget["properties"]
        for metric, _, _, dim in _metrics(widget["properties"])
        if metric in contract.ALL_METRICS
    ]
    assert {metric for metric, _ in ours} >= set(REPORT_METRICS)
    assert all(dim == instance for _, dim in ours), f"another instance's metric: {ours}"


@pytest.mark.parametrize("name", ALL)
def test_batch_duration_is_drawn_against_the_instances_trigger_interval(
    synthesized: Synthesized, name: str
) -> None:
    config = synthesized.config(name)
    widget = _widget(_body(synthesized, name), "Batch duration (ms) vs trigger interval")
    lines = {(m, s, axis) for m, s, axis, _ in _metrics(widget)}
    assert (contract.BATCH_DURATION_MS, "Average", "left") in lines
    assert (contract.BATCH_DURATION_MS, "Maximum", "left") in lines
    assert (contract.BATCH_DURATION_MS, "SampleCount", "right") in lines  # batches per period
    (line,) = widget["annotations"]["horizontal"]
    assert line["value"] == config.job.trigger_interval_sec * 1000
    assert f"trigger interval {config.job.trigger_interval_sec} s" in line["label"]
    assert FALLING_BEHIND in line["label"]


@pytest.mark.parametrize("name", ALL)
def test_totals_rates_and_failures_against_records_in(synthesized: Synthesized, name: str) -> None:
    config = synthesized.config(name)
    body = _body(synthesized, name)

    totals = _widget(body, "This time range")
    assert totals["view"] == "singleValue"
    assert totals["setPeriodToTimeRange"] is True
    assert {(m, s) for m, s, _, _ in _metrics(totals)} == {
        (contract.BATCH_DURATION_MS, "SampleCount"),
        (contract.INPUT_ROWS, "Sum"),
        (contract.FAILURE_RECORDS, "Sum"),
        (contract.BATCH_DURATION_MS, "Maximum"),
        (contract.END_TO_END_LATENCY_MS, "Maximum"),
    }

    rates = _widget(body, "Input vs processed rate (rows/s)")
    assert {m for m, _, _, _ in _metrics(rates)} == {
        contract.INPUT_ROWS_PER_SECOND,
        contract.PROCESSED_ROWS_PER_SECOND,
    }

    failures = _widget(body, "Failure records vs records in")
    assert {(m, s, axis) for m, s, axis, _ in _metrics(failures)} == {
        (contract.FAILURE_RECORDS, "Sum", "left"),
        (contract.INPUT_ROWS, "Sum", "right"),
    }
    (line,) = failures["annotations"]["horizontal"]
    assert line["value"] == config.alarms.failure_records
    assert FAILURE_RECORDS in line["label"]


@pytest.mark.parametrize("name", ALL)
def test_failures_by_reason_one_line_per_reason_of_this_instance(
    synthesized: Synthesized, name: str
) -> None:
    instance = synthesized.config(name).instance_id
    widget = _widget(_body(synthesized, name), "Failure records by reason")
    lines = []
    for line in widget["metrics"]:
        names = [x for x in line if isinstance(x, str)]
        dims = dict(zip(names[2::2], names[3::2], strict=False))
        lines.append((names[1], dims, line[-1].get("stat")))
    assert {dims[contract.REASON_DIMENSION] for _, dims, _ in lines} == set(REASONS)
    assert all(m == contract.FAILURE_RECORDS_BY_REASON for m, _, _ in lines)
    assert all(d[contract.INSTANCE_DIMENSION] == instance for _, d, _ in lines)
    assert all(stat == "Sum" for _, _, stat in lines)


@pytest.mark.parametrize("name", ALL)
def test_undeclared_keys_one_line_per_key_the_job_published(
    synthesized: Synthesized, name: str
) -> None:
    """The keys are the producers' choice: a search expression over the
    instance's UndeclaredKeyRecords series draws one line per Key value."""
    instance = synthesized.config(name).instance_id
    widget = _widget(_body(synthesized, name), "Events with undeclared keys, by key")
    expressions = [line[0]["expression"] for line in widget["metrics"] if "expression" in line[0]]
    namespace = contract.metric_namespace(instance)
    assert expressions == [
        f"SEARCH('{{{namespace},{contract.INSTANCE_DIMENSION},{contract.KEY_DIMENSION}}} "
        f'MetricName="{contract.UNDECLARED_KEY_RECORDS}" '
        f"{contract.INSTANCE_DIMENSION}=\"{instance}\"', 'Sum', 60)"
    ]
