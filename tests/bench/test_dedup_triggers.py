"""bench/dedup_triggers.py: a data batch and its no-data trigger, from progress events."""

from __future__ import annotations

from typing import Any

from bench.dedup_triggers import trigger, triggers


def event(batch: int, rows: int, ms: int, **state: Any) -> dict[str, Any]:
    custom = state.pop("custom", {})
    return {
        "batchId": batch,
        "numInputRows": rows,
        "durationMs": {"addBatch": ms - 1, "triggerExecution": ms},
        "stateOperators": [{**state, "customMetrics": custom}],
    }


def test_a_data_batch_counts_its_no_data_trigger_s_time_and_eviction() -> None:
    events = [
        event(0, 100, 1000, allRemovalsTimeMs=30, custom={"rocksdbTotalBytesRead": 5}),
        event(
            1,
            0,
            500,
            allRemovalsTimeMs=20,
            custom={"timerProcessingTimeMs": 7, "rocksdbTotalBytesWrittenByCompaction": 9},
        ),
    ]

    found = trigger(events, 0)

    assert found["batch_id"] == 0
    assert found["seconds"] == 1.5
    assert found["data_batch_seconds"] == 1.0
    assert found["no_data_batch"] is True
    assert found["eviction_ms"] == 57
    assert found["bytes_read"] == 5
    assert found["compaction_bytes"] == 9
    assert len(found["state"]) == 2
    assert found["state"][1]["custom"]["timerProcessingTimeMs"] == 7


def test_a_batch_followed_by_data_stands_alone() -> None:
    events = [event(0, 100, 1000), event(1, 100, 800), event(2, 50, 700)]

    found = triggers(events, 100)

    assert [t["batch_id"] for t in found] == [0, 1]
    assert [t["no_data_batch"] for t in found] == [False, False]
    assert [t["seconds"] for t in found] == [1.0, 0.8]
