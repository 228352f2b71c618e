"""The figures of :mod:`bench.dedup`: one operator's batches at 0 and at
``fill`` keys, state bytes per key, and every figure of a run together."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from bench.framework import summary


@dataclass(frozen=True)
class Ladder:
    """The sizes of (1)'s query (:func:`bench.dedup._ladder`)."""

    fill: int  # ids held at its top
    fill_batch: int  # records a batch of the fill
    batch: int  # records a warm-up, measured or settle batch of new ids
    settle_batches: int  # batches of new ids between the fill and the measured ones


@dataclass(frozen=True)
class Measured:
    """Every figure of one run, before the result and the rows are written."""

    ladder: Ladder
    count: int  # records of a throughput micro-batch
    flat: dict[str, dict[str, Any]]
    through: dict[str, list[float]]
    cores: dict[str, list[float]]
    bare: list[float]
    expiry: dict[str, dict[str, Any]]
    sustained: dict[str, dict[str, Any]]

    @property
    def timers_s(self) -> float:
        return float(statistics.median(self.through["timers"]))

    @property
    def vs_today(self) -> float:
        return float(statistics.median(self.through["builtin"])) / self.timers_s

    @property
    def cores_vs_today(self) -> float:
        med = statistics.median
        return float(med(self.cores["builtin"]) / med(self.cores["timers"]))

    @property
    def vs_bare(self) -> float:
        return float(statistics.median(self.bare)) / self.timers_s


def flat_figures(filled: dict[str, Any], batch: int) -> dict[str, Any]:
    """(1)'s figures of one operator's ladder (:func:`bench.dedup._ladder`'s
    result): its batches at 0 and at ``fill`` keys; ``batch``: records a batch."""
    med = statistics.median
    zero = filled.pop("zero")
    zero_s = med(b["data_batch_seconds"] for b in zero)
    full_s = med(b["data_batch_seconds"] for b in filled["measured"])
    return {
        "zero_keys": zero,
        "filled": filled,
        "seconds_at_zero": summary([b["data_batch_seconds"] for b in zero]),
        "seconds_at_fill": summary([b["data_batch_seconds"] for b in filled["measured"]]),
        "eviction_ms_at_zero": med(b["eviction_ms"] for b in zero),
        "eviction_ms_at_fill": med(b["eviction_ms"] for b in filled["measured"]),
        "bytes_read_at_zero": med(b["bytes_read"] for b in zero),
        "bytes_read_at_fill": med(b["bytes_read"] for b in filled["measured"]),
        "ratio": round(full_s / zero_s, 3),
        # Background compaction that ran during each measured batch at ``fill`` keys.
        "compaction_bytes_at_fill": [b["compaction_bytes"] for b in filled["measured"]],
        "per_key": per_key(filled, batch),
    }


def per_key(filled: dict[str, Any], batch: int) -> dict[str, Any]:
    """State bytes per key held after the last measured batch at ``fill`` keys."""
    last = filled["measured"][-1]
    keys = int(last["keys_in_state"]) + batch  # the keys after that batch
    sst = int(last["state"][-1]["rocksdbSstFileSize"])
    return {
        "keys_in_state": keys,
        "rocksdb_sst_file_bytes_per_key": round(sst / keys, 1),
        "checkpoint_state_dir_bytes_per_key": round(filled["state_dir_bytes"] / keys, 1),
    }
