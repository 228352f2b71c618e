"""The core seconds a process tree spends in a streaming sink's calls: the
load-robust companion of a batch's wall time on a shared machine."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psutil  # type: ignore[import-untyped]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class CoreTime:
    """A sink that also records the CPU time the whole process tree (this
    driver, the JVM, its Python workers) spends in each ``foreachBatch`` call,
    where a batch's work runs. On a shared machine other processes stretch a
    batch's wall time, much less the core time it spends: the ratio of core
    seconds is the load-robust companion of the wall-time ratio."""

    def __init__(self, sink: Callable[[DataFrame, int], None]) -> None:
        self._sink = sink
        self._by_batch: dict[int, float] = {}

    def __call__(self, frame: DataFrame, batch_id: int) -> None:
        before = tree_cpu_seconds()
        self._sink(frame, batch_id)
        self._by_batch[batch_id] = tree_cpu_seconds() - before

    def core_seconds(self, batch: dict[str, Any]) -> float:
        """A data batch's and its no-data batch's core seconds."""
        first = int(batch["batch_id"])
        ids = (first, first + 1) if batch["no_data_batch"] else (first,)
        return round(sum(self._by_batch.get(i, 0.0) for i in ids), 3)


def tree_cpu_seconds() -> float:
    """User + system CPU of this process and every descendant, reaped ones
    included (a Python worker that exited is counted in its parent)."""
    me = psutil.Process()
    total = 0.0
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total
