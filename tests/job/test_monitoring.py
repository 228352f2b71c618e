"""Per-batch metrics: names from the contract, values from progress, and a
CloudWatch outage that is logged and counted but never raised."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import boto3

from job.cloudwatch import CloudWatchPublisher, Datum, metric_data
from job.key_series import UndeclaredKeySeries
from job.micro_batch import BatchResult
from job.monitoring import (
    BatchResults,
    make_listener,
    progress_datums,
    scheduling_delay_ms,
    scheduling_delay_ratio,
    source_lag_ms,
)
from local.emulators import Endpoints, free_port
from model import contract

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
PROGRESS: dict[str, Any] = {
    "batchId": 7,
    "numInputRows": 1200,
    "inputRowsPerSecond": 100.0,
    "processedRowsPerSecond": 400.0,
    "durationMs": {"triggerExecution": 25_000, "addBatch": 24_000},
    "sources": [{"metrics": {"avgMsBehindLatest": "1500.0", "maxMsBehindLatest": "4000"}}],
}


def _by_name(datums: list[Datum]) -> dict[str, float]:
    return {d.name: d.value for d in datums}


def test_progress_becomes_every_contract_metric() -> None:
    result = BatchResult(7, 1200, 12, NOW - timedelta(seconds=42), (date(2026, 1, 2),))
    values = _by_name(progress_datums(PROGRESS, trigger_interval_sec=10, result=result, now=NOW))
    assert set(values) == set(contract.ALL_METRICS)
    assert values[contract.BATCH_DURATION_MS] == 25_000
    assert values[contract.SCHEDULING_DELAY_RATIO] == 0.0, "no previous batch: no wait"
    assert values[contract.END_TO_END_LATENCY_MS] == 42_000
    assert values[contract.FAILURE_RECORDS] == 12
    assert values[contract.SOURCE_LAG_MS] == 4_000
    assert values[contract.INPUT_ROWS] == 1200
    assert values[contract.HEARTBEAT] == 1


def test_failures_by_reason_become_one_datum_each_with_the_reason_dimension() -> None:
    result = BatchResult(
        7, 1200, 5, None, (), failures_by_reason=(("malformed_json", 3), ("wrong_type", 2))
    )
    datums = progress_datums(PROGRESS, trigger_interval_sec=10, result=result, now=NOW)
    by_reason = {d.reason: d.value for d in datums if d.name == contract.FAILURE_RECORDS_BY_REASON}
    assert by_reason == {"malformed_json": 3, "wrong_type": 2}
    payload = metric_data(
        [d for d in datums if d.name == contract.FAILURE_RECORDS_BY_REASON], "orders-eu-west-1"
    )
    assert payload[0]["Dimensions"] == [
        {"Name": contract.INSTANCE_DIMENSION, "Value": "orders-eu-west-1"},
        {"Name": contract.REASON_DIMENSION, "Value": "malformed_json"},
    ]
    total = _by_name(datums)[contract.FAILURE_RECORDS]
    assert total == sum(by_reason.values())


def test_undeclared_keys_become_one_datum_per_named_key_with_the_key_dimension() -> None:
    many = tuple((f"k{i:02d}", 100 - i) for i in range(contract.UNDECLARED_KEY_SERIES + 3))
    counts = (("channel", 200), ("", 7), ("caf\u00e9", 5), *many)
    result = BatchResult(7, 1200, 0, None, (), undeclared_keys=counts)
    series = UndeclaredKeySeries()
    datums = progress_datums(
        PROGRESS, trigger_interval_sec=10, result=result, now=NOW, key_series=series
    )
    by_key = {d.key: d.value for d in datums if d.name == contract.UNDECLARED_KEY_RECORDS}
    assert len(by_key) == contract.UNDECLARED_KEY_SERIES + 1
    assert by_key["channel"] == 200
    assert by_key[contract.UNNAMEABLE_KEY] == 12, "an empty and a non-ASCII key share one name"
    # 20 names: channel, (not ascii) and k00..k17; k18..k22 fall under (other).
    assert "k17" in by_key and "k18" not in by_key, "the first (most frequent) keys are named"
    assert by_key[contract.OTHER_KEYS] == sum(c for k, c in many[18:])
    assert sum(by_key.values()) == sum(c for _, c in counts), "every record is counted"
    payload = metric_data(
        [d for d in datums if d.name == contract.UNDECLARED_KEY_RECORDS], "orders-eu-west-1"
    )
    assert payload[0]["Dimensions"] == [
        {"Name": contract.INSTANCE_DIMENSION, "Value": "orders-eu-west-1"},
        {"Name": contract.KEY_DIMENSION, "Value": "channel"},
    ]
    none = progress_datums(PROGRESS, trigger_interval_sec=10, result=BatchResult(
        8, 10, 0, None, ()), now=NOW)  # fmt: skip
    assert not [d for d in none if d.name == contract.UNDECLARED_KEY_RECORDS]


def test_no_latency_without_records_and_no_lag_when_the_source_reports_none() -> None:
    progress = {**PROGRESS, "sources": [{"metrics": {}}], "inputRowsPerSecond": "NaN"}
    values = _by_name(progress_datums(progress, trigger_interval_sec=10, result=None, now=NOW))
    assert contract.END_TO_END_LATENCY_MS not in values
    assert contract.SOURCE_LAG_MS not in values
    assert values[contract.INPUT_ROWS_PER_SECOND] == 0.0
    assert source_lag_ms({"sources": []}) is None


def test_scheduling_delay_counts_only_the_wait_behind_a_batch_that_overran() -> None:
    interval = 10_000.0
    # Previous batch started on the 100 s tick and took 25 s: the 110 s tick's
    # batch could only start at 125 s, 15 s late.
    assert scheduling_delay_ms((100_000.0, 25_000.0), 125_000.0, interval) == 15_000.0
    assert scheduling_delay_ratio((100_000.0, 25_000.0), 125_000.0, 5_000.0, interval) == 0.75
    # Previous batch fit its interval: the next one starts on its tick, no wait.
    assert scheduling_delay_ms((100_000.0, 4_000.0), 110_000.0, interval) == 0.0
    # Idle ticks between batches are not a wait either.
    assert scheduling_delay_ms((100_000.0, 4_000.0), 190_000.0, interval) == 0.0


def test_progress_timestamp_feeds_the_ratio() -> None:
    progress = {**PROGRESS, "timestamp": "1970-01-01T00:02:05.000Z"}
    values = _by_name(
        progress_datums(
            progress,
            trigger_interval_sec=10,
            result=None,
            now=NOW,
            previous=(100_000.0, 25_000.0),
        )
    )
    assert values[contract.SCHEDULING_DELAY_RATIO] == 15_000 / (15_000 + 25_000)


def test_listener_publishes_the_last_batch_before_it_says_terminated() -> None:
    """The job waits for ``terminated`` before it removes the listener: by then
    the last progress event (delivered before the termination event, in order)
    must be published and flushed."""
    sent: list[dict[str, Any]] = []
    publisher = CloudWatchPublisher("i", lambda **kw: sent.extend(kw["MetricData"]))
    results = BatchResults()
    results.put(BatchResult(7, 1200, 12, NOW - timedelta(seconds=42), ()))
    listener = make_listener(publisher, results, 10, clock=lambda: NOW)
    try:
        listener.onQueryProgress(
            SimpleNamespace(progress=SimpleNamespace(json=json.dumps(PROGRESS)))
        )
        assert not listener.terminated.is_set()
        listener.onQueryTerminated(None)
        assert listener.terminated.is_set()
        names = {d["MetricName"] for d in sent}
        assert contract.FAILURE_RECORDS in names, "published (flushed) before terminated"
    finally:
        publisher.close(timeout=5)


def test_published_metrics_reach_moto_cloudwatch(endpoints: Endpoints) -> None:
    instance = f"monitoring-{free_port()}"
    publisher = CloudWatchPublisher.for_config(
        instance, "us-east-1", endpoints.aws_url, timeout_sec=5, max_attempts=2
    )
    stamp = datetime.now(UTC)
    try:
        publisher.publish(
            progress_datums(PROGRESS, trigger_interval_sec=10, result=None, now=stamp)
        )
        assert publisher.flush()
    finally:
        publisher.close()
    client = boto3.client("cloudwatch", endpoint_url=endpoints.aws_url, region_name="us-east-1")
    listed = client.list_metrics(
        Namespace=contract.metric_namespace(instance),
        Dimensions=[{"Name": contract.INSTANCE_DIMENSION, "Value": instance}],
    )["Metrics"]
    assert contract.BATCH_DURATION_MS in {m["MetricName"] for m in listed}
    assert publisher.published >= 8


def test_batch_results_hand_off_is_bounded() -> None:
    results = BatchResults(limit=2)
    for batch in range(3):
        results.put(BatchResult(batch, 0, 0, None, ()))
    assert results.pop(0) is None
    assert results.pop(2) is not None
    assert results.pop(2) is None
