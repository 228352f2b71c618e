"""Per-batch metrics: names from the contract, values from progress, and a
CloudWatch outage that is logged and counted but never raised."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from job.micro_batch import BatchResult
from job.monitoring import (
    BatchResults,
    CloudWatchPublisher,
    Datum,
    UndeclaredKeySeries,
    make_listener,
    metric_data,
    progress_datums,
    scheduling_delay_ms,
    scheduling_delay_ratio,
    source_lag_ms,
)
from local.emulators import Endpoints, free_port
from model import contract
from model.polling import wait_for

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


def test_a_thousand_invented_keys_make_at_most_21_series_kept_across_restarts(
    tmp_path: Path,
) -> None:
    """Issue 41 item 14: 1,000 distinct undeclared keys over 50 batches of one
    run, published to (emulated) CloudWatch: at most 21 series (the first 20
    keys by name, the rest under ``(other)``), every record counted. A
    restart keeps the same 20 names."""
    checkpoint = str(tmp_path / "checkpoint")
    series = UndeclaredKeySeries.stored(checkpoint)
    datums: list[Datum] = []
    for batch in range(50):
        keys = tuple((f"invented_{batch}_{i}", 1 + i % 3) for i in range(20))
        datums += series.datums(keys, NOW + timedelta(seconds=batch))
    instance = "orders-eu-west-1"
    with mock_aws():
        cloudwatch = boto3.client("cloudwatch", region_name="eu-west-1")
        payload = metric_data(datums, instance)
        for start in range(0, len(payload), 500):
            cloudwatch.put_metric_data(
                Namespace=contract.metric_namespace(instance),
                MetricData=payload[start : start + 500],
            )
        listed = cloudwatch.list_metrics(
            Namespace=contract.metric_namespace(instance),
            MetricName=contract.UNDECLARED_KEY_RECORDS,
        )["Metrics"]
    keys = {
        d["Value"] for m in listed for d in m["Dimensions"] if d["Name"] == contract.KEY_DIMENSION
    }
    # (moto lists a series once per data point: count the distinct ones)
    distinct = {tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in listed}
    assert len(distinct) <= contract.UNDECLARED_KEY_SERIES + 1
    assert len(keys) == contract.UNDECLARED_KEY_SERIES + 1
    assert contract.OTHER_KEYS in keys
    assert sum(d.value for d in datums) == 50 * sum(1 + i % 3 for i in range(20))
    first = {f"invented_0_{i}" for i in range(20)}
    assert keys - {contract.OTHER_KEYS} == first
    # A restart: the same names, so a key seen first after it is (other).
    again = UndeclaredKeySeries.stored(checkpoint)
    assert set(again.named) == first
    after = again.datums((("invented_0_3", 4), ("brand_new", 5)), NOW)
    assert {d.key: d.value for d in after} == {"invented_0_3": 4, contract.OTHER_KEYS: 5}


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


def test_metric_data_carries_the_instance_dimension() -> None:
    data = metric_data([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)], "orders-eu-west-1")
    assert data[0]["Dimensions"] == [{"Name": "Instance", "Value": "orders-eu-west-1"}]


def test_publisher_batches_and_bounds_the_buffer() -> None:
    calls: list[int] = []
    publisher = CloudWatchPublisher(
        "i",
        lambda **kw: calls.append(len(kw["MetricData"])),
        flush_interval_sec=60,
        buffer_limit=700,
    )
    try:
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)] * 1000)
        assert publisher.flush()
    finally:
        publisher.close()
    assert publisher.dropped == 300
    assert sum(calls) == 700 and max(calls) <= 500


def _returns_within(seconds: float, call: Callable[[], object]) -> object:
    """``call()`` on a helper thread; fails (instead of hanging) if it outlives ``seconds``."""
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds}s"
    return outcome[0]


def test_flush_and_close_honour_their_timeout_when_a_put_hangs() -> None:
    release = threading.Event()
    calls: list[int] = []

    def hanging_put(**kw: Any) -> None:
        calls.append(len(kw["MetricData"]))
        release.wait(30)

    publisher = CloudWatchPublisher("i", hanging_put, flush_interval_sec=60)
    try:
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
        assert wait_for(lambda: calls, timeout=5, interval=0.01), "the first put never started"
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)] * 2)  # queued behind it
        started = time.monotonic()
        assert _returns_within(3, lambda: publisher.flush(timeout=0.5)) is False
        assert _returns_within(3, lambda: publisher.close(timeout=0.5)) is None
        assert time.monotonic() - started < 2.5, "flush + close took longer than their bounds"
        assert calls == [1], "one call in flight, none started by the waiters"
    finally:
        release.set()
    publisher.close(timeout=5)  # the call returned: the sender sends the rest and ends
    assert publisher.published == 3, "the hung call and the queued points are sent after all"


def test_flush_reports_whether_what_was_pending_reached_cloudwatch() -> None:
    failing = threading.Event()

    def put(**_kw: Any) -> None:
        if failing.is_set():
            raise ConnectionError("CloudWatch away")

    publisher = CloudWatchPublisher("i", put, flush_interval_sec=60)
    try:
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
        assert publisher.flush(timeout=5) is True
        failing.set()
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)] * 3)
        assert publisher.flush(timeout=5) is False
        failing.clear()
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
        assert publisher.flush(timeout=5) is True, "an earlier outage does not fail a later flush"
        assert publisher.flush(timeout=5) is True, "nothing pending: flushed"
    finally:
        publisher.close(timeout=5)
    assert (publisher.published, publisher.dropped, publisher.failed_calls) == (2, 3, 1)
    publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
    assert publisher.dropped == 4, "published after close: dropped and counted"


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


def test_cloudwatch_outage_is_logged_and_counted_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    publisher = CloudWatchPublisher.for_config(
        "i", "us-east-1", dead, timeout_sec=1, max_attempts=2
    )
    with caplog.at_level(logging.WARNING, logger="job.monitoring"):
        publisher.publish([Datum(contract.HEARTBEAT, 1.0, "Count", NOW)])
        assert publisher.flush() is False
        publisher.close(timeout=5)
    assert publisher.failed_calls >= 1
    assert publisher.published == 0
    assert "CloudWatch put_metric_data failed" in caplog.text


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
