"""bench/core_time.py: the core seconds of each sink call, a batch and its no-data one."""

from __future__ import annotations

from typing import Any

from bench.core_time import CoreTime, tree_cpu_seconds


def test_each_call_s_core_time_is_kept_by_batch_and_summed_with_its_no_data_batch() -> None:
    called: list[int] = []

    def spin(_frame: Any, batch_id: int) -> None:
        called.append(batch_id)
        total = 0
        for i in range(200_000 * (batch_id + 1)):
            total += i

    sink = CoreTime(spin)
    for batch_id in (3, 4, 9):
        sink(None, batch_id)  # type: ignore[arg-type]

    assert called == [3, 4, 9]
    alone = sink.core_seconds({"batch_id": 3, "no_data_batch": False})
    paired = sink.core_seconds({"batch_id": 3, "no_data_batch": True})
    assert paired >= alone >= 0.0
    assert paired > 0.0
    assert sink.core_seconds({"batch_id": 20, "no_data_batch": True}) == 0.0


def test_the_tree_s_cpu_only_grows() -> None:
    before = tree_cpu_seconds()
    sum(range(1_000_000))
    assert tree_cpu_seconds() > before
