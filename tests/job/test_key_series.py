"""``job.key_series``: at most a bounded number of named undeclared-key
series, kept across restarts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import boto3
from moto import mock_aws

from job.cloudwatch import Datum, metric_data
from job.key_series import UndeclaredKeySeries
from model import contract

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_a_thousand_invented_keys_make_at_most_21_series_kept_across_restarts(
    tmp_path: Path,
) -> None:
    """1,000 distinct undeclared keys over 50 batches of one
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
