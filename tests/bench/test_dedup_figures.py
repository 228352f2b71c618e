"""bench/dedup_figures.py: one ladder's figures and a run's ratios."""

from __future__ import annotations

from typing import Any

import pytest

from bench.dedup_figures import Ladder, Measured, flat_figures, per_key


def batch(seconds: float, keys: int = 0, sst: int = 0) -> dict[str, Any]:
    return {
        "data_batch_seconds": seconds,
        "eviction_ms": seconds * 10,
        "bytes_read": 100,
        "compaction_bytes": 7,
        "keys_in_state": keys,
        "state": [{"rocksdbSstFileSize": sst}],
    }


def test_flat_figures_compare_the_batches_at_fill_keys_with_those_at_zero() -> None:
    filled = {
        "zero": [batch(1.0), batch(2.0), batch(1.5)],
        "measured": [batch(3.0, keys=990), batch(3.0, keys=1_990, sst=30_000)],
        "state_dir_bytes": 60_000,
    }

    found = flat_figures(filled, batch=10)

    assert found["ratio"] == 2.0
    assert found["seconds_at_zero"]["median"] == 1.5
    assert found["eviction_ms_at_fill"] == 30.0
    assert found["compaction_bytes_at_fill"] == [7, 7]
    assert "zero" not in found["filled"]
    assert found["per_key"] == {
        "keys_in_state": 2_000,
        "rocksdb_sst_file_bytes_per_key": 15.0,
        "checkpoint_state_dir_bytes_per_key": 30.0,
    }


def test_per_key_counts_the_last_batch_s_own_keys() -> None:
    filled = {"measured": [batch(1.0, keys=90, sst=500)], "state_dir_bytes": 1_000}

    assert per_key(filled, 10)["keys_in_state"] == 100


def test_the_ratios_are_of_medians() -> None:
    found = Measured(
        ladder=Ladder(fill=1, fill_batch=1, batch=1, settle_batches=1),
        count=1,
        flat={},
        through={"timers": [2.0, 4.0, 3.0], "builtin": [1.5, 2.0, 2.5]},
        cores={"timers": [4.0], "builtin": [3.0]},
        bare=[6.0, 1.0, 1.5],
        expiry={},
        sustained={},
    )

    assert found.timers_s == 3.0
    assert found.vs_today == pytest.approx(2.0 / 3.0)
    assert found.cores_vs_today == 0.75
    assert found.vs_bare == 0.5
