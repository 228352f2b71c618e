"""A known metrics dump (the documented JSON format) for the report tests.

Numbers chosen so every figure is easy to check by hand: trigger 2 s; four
batches of 12,000, 1,500, 2,500 and 900 ms (p50 1,500, two over the trigger);
latency peaking at 15,000 ms; 2,800 input rows; 50 failure records (30
malformed_json, 20 not_utf8); one shard of eight records and a checkpoint of
three batches, from which the source lag is derived: at its planned time,
batch 0 (from TRIM_HORIZON) finds records 1-3 waiting, the oldest for 3 s;
batch 1 finds 3-7 past batch 0's end (13 s); batch 2 finds 6-8 (22 s).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from model import contract

T0 = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)
SHARD = "shardId-000000000000"


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def ms(seconds: float) -> float:
    return (T0 + timedelta(seconds=seconds)).timestamp() * 1000.0


def points(*pairs: tuple[float, float]) -> list[dict[str, Any]]:
    """One batch per period: count 1, sum = max = the value."""
    return [{"at": at(s), "count": 1, "sum": v, "max": v} for s, v in pairs]


def instance(name: str) -> dict[str, Any]:
    return {
        "instance": name,
        "trigger_interval_sec": 2,
        "window": {"start": at(0), "end": at(40)},
        "period_sec": 1,
        "metrics": {
            contract.BATCH_DURATION_MS: points((10, 12000), (25, 1500), (30, 2500), (34, 900)),
            contract.END_TO_END_LATENCY_MS: points((10, 15000), (25, 4000), (30, 2600)),
            contract.INPUT_ROWS: points((10, 2000), (25, 500), (30, 300), (34, 0)),
            contract.INPUT_ROWS_PER_SECOND: points((10, 800), (25, 120), (30, 60), (34, 0)),
            contract.PROCESSED_ROWS_PER_SECOND: points(
                (10, 166.7), (25, 333.3), (30, 120), (34, 0)
            ),
            contract.FAILURE_RECORDS: points((10, 40), (25, 10), (30, 0), (34, 0)),
        },
        "failures_by_reason": {"malformed_json": 30, "not_utf8": 20},
        "thresholds": {contract.END_TO_END_LATENCY_MS: 20000},
        "summary": [f"instance {name}", "  records produced         2,850"],
        "batches": [
            # batch 0 ends after record 2, batch 1 after 5, batch 2 after 8
            {"id": 0, "planned_at": at(0), "committed": True, "shards": {SHARD: {"after": "2"}}},
            {"id": 1, "planned_at": at(12), "committed": True, "shards": {SHARD: {"after": "5"}}},
            {"id": 2, "planned_at": at(27), "committed": False, "shards": {SHARD: {"after": "8"}}},
        ],
        # records 1-3 arrive before batch 0 is planned, 4-7 between 1 s and 11 s,
        # 8 at 20 s
        "arrivals": {
            SHARD: [
                ["1", ms(-3)],
                ["2", ms(-2)],
                ["3", ms(-1)],
                ["4", ms(1)],
                ["5", ms(2)],
                ["6", ms(5)],
                ["7", ms(11)],
                ["8", ms(20)],
            ]
        },
    }


def dump(*names: str) -> dict[str, Any]:
    return {
        "format": "streaming-run-metrics",
        "version": 1,
        "instances": [instance(n) for n in names or ("orders-ap-northeast-2",)],
    }
