"""local.metrics_dump reads both kinds of ``python-kinesis`` offsets: the
executor-side reader's v2 offsets say where a batch *starts*, the earlier
driver-side reader's where it *ended*; the derived source lag is the same."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from local.metrics_dump import checkpoint_batches
from local.report_data import lag_from_checkpoint
from tests.local.report_fixture import SHARD, T0, ms

# Records 1..8 of one shard, arriving 3 s apart from -3 s.
ARRIVALS = {SHARD: [(str(n), ms(-3 + 3 * (n - 1))) for n in range(1, 9)]}


def offsets_text(planned_sec: float, source: dict[str, Any]) -> str:
    metadata = {"batchWatermarkMs": 0, "batchTimestampMs": round(ms(planned_sec)), "conf": {}}
    return f"v1\n{json.dumps(metadata)}\n{json.dumps(source)}\n"


def position(after: str | None) -> dict[str, Any]:
    return {SHARD: {"after": after, "ts": None, "done": False}}


def v2(batch: int, start: str | None) -> dict[str, Any]:
    """The executor-side reader's offset: where batch ``batch`` starts."""
    return {"v": 2, "batch": batch, "shards": position(start), "reads": [{"shard": SHARD}]}


def lag(offsets: dict[int, str]) -> list[tuple[int, int, float]]:
    batches = checkpoint_batches(offsets, commits=set(offsets))
    return [(p.batch_id, p.records, p.age_ms) for p in lag_from_checkpoint(batches, ARRIVALS)]


# Batch 0 at 0 s reads 1-2, batch 1 at 12 s reads 3-5, batch 2 at 27 s reads on.
PLANNED = {0: 0.0, 1: 12.0, 2: 27.0}
# (batch, records arrived past its start by its planned time, the oldest's wait)
EXPECTED = [(0, 2, 3000.0), (1, 4, 9000.0), (2, 3, 15000.0)]


def test_v2_offsets_are_batch_starts() -> None:
    """At 12 s, batch 1 starts after record 2: records 3-6 wait, the oldest
    since 3 s. Read as batch ends, batch 0's start (the stream's start) gave
    1-6 waiting since -3 s: one batch high."""
    starts = {0: None, 1: "2", 2: "5"}
    offsets = {b: offsets_text(PLANNED[b], v2(b, starts[b])) for b in PLANNED}
    assert lag(offsets) == EXPECTED


def test_driver_side_offsets_are_batch_ends() -> None:
    ends = {0: "2", 1: "5", 2: "8"}
    offsets = {b: offsets_text(PLANNED[b], {"shards": position(ends[b])}) for b in PLANNED}
    assert lag(offsets) == EXPECTED


def test_a_checkpoint_migrated_from_the_driver_side_reader() -> None:
    """Batch 0 was the old reader's (ends after 2); batches 1 and 2 are v2,
    batch 1 starting where batch 0 ended."""
    offsets = {
        0: offsets_text(PLANNED[0], {"shards": position("2")}),
        1: offsets_text(PLANNED[1], v2(1, "2")),
        2: offsets_text(PLANNED[2], v2(2, "5")),
    }
    assert lag(offsets) == EXPECTED
    last = checkpoint_batches(offsets, commits={0, 1})[-1]
    assert last.planned_at == T0 + timedelta(seconds=27) and not last.committed
