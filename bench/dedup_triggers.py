"""A micro-batch's figures from a streaming query's progress events, for
:mod:`bench.dedup`: a data batch with the no-data trigger that follows it, its
state operator's eviction time, bytes read and compaction."""

from __future__ import annotations

from typing import Any, Final

from bench.stream import ran_batch, state_figures

# Progress figures of the state operator that show what eviction costs.
READ_METRICS: Final = ("rocksdbTotalBytesRead", "rocksdbTotalBytesReadThroughIterator")


def triggers(events: list[dict[str, Any]], rows: int) -> list[dict[str, Any]]:
    """Each data batch of ``rows`` with the no-data trigger that follows it."""
    return [
        trigger(events, index)
        for index, event in enumerate(events)
        if ran_batch(event) and int(event["numInputRows"]) == rows
    ]


def trigger(events: list[dict[str, Any]], index: int) -> dict[str, Any]:
    """The data batch ``events[index]`` with the no-data trigger that follows it, if any."""
    event = events[index]
    follow = events[index + 1] if index + 1 < len(events) else None
    pair = [event]
    if follow is not None and ran_batch(follow) and int(follow["numInputRows"]) == 0:
        pair.append(follow)
    figures = [state_figures(e) for e in pair]
    return {
        "batch_id": int(event["batchId"]),
        "seconds": sum(int(e["durationMs"]["triggerExecution"]) for e in pair) / 1000,
        "data_batch_seconds": int(event["durationMs"]["triggerExecution"]) / 1000,
        "no_data_batch": len(pair) == 2,
        # The built-in operator's scan is allRemovalsTimeMs; the timers'
        # walk of their index (and the expired keys) timerProcessingTimeMs.
        "eviction_ms": sum(
            f.get("allRemovalsTimeMs", 0)
            + f.get("customMetrics", {}).get("timerProcessingTimeMs", 0)
            for f in figures
        ),
        "bytes_read": sum(
            f.get("customMetrics", {}).get(m, 0) for f in figures for m in READ_METRICS
        ),
        "compaction_bytes": sum(
            f.get("customMetrics", {}).get("rocksdbTotalBytesWrittenByCompaction", 0)
            for f in figures
        ),
        "state": [
            {k: v for k, v in f.items() if k != "customMetrics"}
            | {"custom": f.get("customMetrics", {})}
            for f in figures
        ],
    }
