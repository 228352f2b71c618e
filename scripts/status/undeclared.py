"""Keys events carry that the instance does not declare, from CloudWatch.

The job counts, per batch, the valid events carrying each key that
``job.event_fields`` does not declare, and publishes them as
``UndeclaredKeyRecords`` with a ``Key`` dimension (:mod:`job.monitoring`): the
first 20 keys the instance sees by name, every later one under ``(other)``;
the values are kept in the row's ``undeclared_fields`` column. This reads those
series back over the status window: per key, how many events carried it, the
share of the window's input records, and when it was first seen in the window.
So the owner of an instance reads "field ``channel`` arrived in 12 % of events
since 10:04" before anyone asks.

``ListMetrics`` finds the keys (one series per Key value;
https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_ListMetrics.html),
then one ``GetMetricData`` reads every key's sums and the input rows'
(https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricData.html,
at most 500 queries per call: the keys are capped below that).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from model import contract
from model.record import UNDECLARED_FIELDS
from scripts.status.metrics import MetricsWindow, metric_data, metric_query, points

# GetMetricData takes at most 500 queries per call; one is the input rows'.
MAX_KEYS: Final = 400
_INPUT: Final = "input"


@dataclass(frozen=True)
class KeyCount:
    """One undeclared key over the window."""

    key: str
    records: int
    share: float | None  # of the window's input records; None when none were counted
    first_seen: datetime | None


def list_keys(cloudwatch: Any, instance: str) -> list[str]:
    """Every Key value the instance published ``UndeclaredKeyRecords`` for."""
    keys: set[str] = set()
    pages = cloudwatch.get_paginator("list_metrics").paginate(
        Namespace=contract.metric_namespace(instance),
        MetricName=contract.UNDECLARED_KEY_RECORDS,
    )
    for page in pages:
        for metric in page.get("Metrics", []):
            for dimension in metric.get("Dimensions", []):
                if dimension.get("Name") == contract.KEY_DIMENSION:
                    keys.add(str(dimension["Value"]))
    return sorted(keys)[:MAX_KEYS]


def key_queries(instance: str, keys: Iterable[str], period_sec: int) -> list[dict[str, Any]]:
    """One Sum query per key (ids ``k0``, ``k1``, ...) and one for the input rows."""
    return [
        metric_query(_INPUT, instance, contract.INPUT_ROWS, "Sum", period_sec),
        *(
            metric_query(
                f"k{i}", instance, contract.UNDECLARED_KEY_RECORDS, "Sum", period_sec, key=key
            )
            for i, key in enumerate(keys)
        ),
    ]


def key_counts(keys: list[str], results: Iterable[Mapping[str, Any]]) -> list[KeyCount]:
    """Sum each query's points; most frequent key first. Pure."""
    sums: dict[str, float] = {}
    first: dict[str, datetime] = {}
    for result in results:
        query_id = str(result["Id"])
        pairs = points(result)
        sums[query_id] = sums.get(query_id, 0.0) + sum(v for _, v in pairs)
        seen = [stamp for stamp, value in pairs if value > 0]
        if seen:
            earliest = min(seen)
            first[query_id] = min(first.get(query_id, earliest), earliest)
    total = sums.get(_INPUT, 0.0)
    found = [
        KeyCount(
            key=key,
            records=int(sums.get(f"k{i}", 0.0)),
            share=(sums.get(f"k{i}", 0.0) / total) if total > 0 else None,
            first_seen=first.get(f"k{i}"),
        )
        for i, key in enumerate(keys)
    ]
    return sorted((k for k in found if k.records > 0), key=lambda k: (-k.records, k.key))


def read_undeclared_keys(cloudwatch: Any, instance: str, window: MetricsWindow) -> list[KeyCount]:
    """The undeclared keys seen in the window, most frequent first."""
    keys = list_keys(cloudwatch, instance)
    if not keys:
        return []
    results = metric_data(cloudwatch, key_queries(instance, keys, window.period_sec), window)
    return key_counts(keys, results)


def undeclared_lines(keys: list[KeyCount], minutes: float, shown: int = 10) -> list[str]:
    """The status report's lines: one per key, or one saying there were none."""
    head = f"undeclared keys (kept in {UNDECLARED_FIELDS}; CloudWatch, last {minutes:g} min)"
    if not keys:
        return [head, "  none: every key of every valid event is a declared field"]
    lines = [head]
    for key in keys[:shown]:
        share = f"{key.share:.1%} of input records" if key.share is not None else "share unknown"
        since = f", since {key.first_seen:%Y-%m-%d %H:%M:%S}" if key.first_seen else ""
        if key.key == contract.OTHER_KEYS:
            lines.append(
                f"  other keys (past the first {contract.UNDECLARED_KEY_SERIES} the instance "
                f"named) arrived in {key.records:,} events ({share}{since}); the table keeps "
                "each"
            )
            continue
        lines.append(f"  field {key.key!r} arrived in {key.records:,} events ({share}{since})")
    if len(keys) > shown:
        lines.append(f"  ... and {len(keys) - shown} more")
    lines.append(
        '  declare one in job.event_fields ("required": false) and deploy: later rows get '
        'it as a column (docs/infra.md, "Event schema")'
    )
    return lines
