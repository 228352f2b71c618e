"""The figures of :mod:`bench.latency`: each measured id's latency by window,
ours (put -> readable in the table) and the bare loop's (put -> seen), their
percentiles, and the batches' own figures."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench import framework
from local.summary import percentile as nearest_rank


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100, :func:`local.summary.percentile`,
    the rank the run summary uses) of a sample that must not be empty."""
    found = nearest_rank(values, q)
    if found is None:
        raise ValueError("percentile of no values")
    return found


def stats(latencies: Sequence[float]) -> dict[str, Any]:
    return {
        "records": len(latencies),
        "p50_seconds": round(percentile(latencies, 50), 3),
        "p99_seconds": round(percentile(latencies, 99), 3),
        "max_seconds": round(max(latencies), 3),
    }


def batch_figures(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The measured batches' figures from the query's progress events."""
    ran = [e for e in events if "addBatch" in e.get("durationMs", {})]
    if not ran:
        return {"batches": 0}
    keys = sorted({k for e in ran for k in e["durationMs"]})
    return {
        "batches": len(ran),
        "input_rows_per_batch_median": statistics.median(int(e["numInputRows"]) for e in ran),
        "trigger_execution_seconds": framework.summary(
            [e["durationMs"]["triggerExecution"] / 1000 for e in ran]
        ),
        "trigger_execution_p99_seconds": round(
            percentile([e["durationMs"]["triggerExecution"] / 1000 for e in ran], 99), 3
        ),
        "duration_ms_median": {
            k: statistics.median(e["durationMs"].get(k, 0) for e in ran) for k in keys
        },
    }


def job_split(seconds: Mapping[int, Mapping[str, float]], after_batch: int) -> dict[str, float]:
    """The median of each part of the job's own split over the batches after
    ``after_batch`` (the warm-up's)."""
    measured = [b for b in seconds if b > after_batch]
    return {
        name: round(statistics.median(seconds[b].get(name, 0.0) for b in measured), 3)
        for name in sorted({n for b in measured for n in seconds[b]})
    }


@dataclass(frozen=True)
class Windows:
    """Each window's latencies: ours (put -> readable) and the loop's (put -> seen)."""

    ours: list[list[float]]
    theirs: list[list[float]]

    @classmethod
    def split(
        cls,
        puts: Mapping[str, float],
        readable: Mapping[str, float],
        seen_by_loop: Mapping[str, float],
        *,
        started: float,
        windows: int,
        window_sec: int,
    ) -> Windows:
        """Each put id into the window its put fell in (the last takes the
        overrun); an id that never became readable fails the run."""
        ours: list[list[float]] = [[] for _ in range(windows)]
        theirs: list[list[float]] = [[] for _ in range(windows)]
        missing = 0
        for event_id, put in puts.items():
            window = min(windows - 1, int((put - started) // window_sec))
            if event_id not in readable:
                missing += 1
                continue
            ours[window].append(readable[event_id] - put)
            if event_id in seen_by_loop:
                theirs[window].append(seen_by_loop[event_id] - put)
        if missing:
            raise RuntimeError(f"{missing} produced ids never became readable in the table")
        return cls(ours, theirs)

    @property
    def per_window(self) -> list[dict[str, Any]]:
        return [stats(w) for w in self.ours]

    @property
    def loop_windows(self) -> list[dict[str, Any]]:
        return [stats(w) for w in self.theirs if w]

    @property
    def all_ours(self) -> list[float]:
        return [x for w in self.ours for x in w]

    @property
    def all_theirs(self) -> list[float]:
        return [x for w in self.theirs for x in w]

    @property
    def p99s(self) -> list[float]:
        return [w["p99_seconds"] for w in self.per_window]

    @property
    def p50s(self) -> list[float]:
        return [w["p50_seconds"] for w in self.per_window]

    @property
    def p99(self) -> float:
        """The median of the windows' p99."""
        return float(statistics.median(self.p99s))

    @property
    def p50(self) -> float:
        return float(statistics.median(self.p50s))

    @property
    def paired(self) -> list[tuple[list[float], list[float]]]:
        """Each window with both sides measured: the same load on both."""
        return [(o, t) for o, t in zip(self.ours, self.theirs, strict=True) if o and t]

    @property
    def loop_p99(self) -> float:
        paired = self.paired
        if not paired:
            return float("nan")
        return float(statistics.median(percentile(t, 99) for _, t in paired))

    @property
    def ratio(self) -> float:
        """Each window's p99 over the loop's p99 in the same window (median)."""
        paired = self.paired
        if not paired:
            return float("nan")
        return float(statistics.median(percentile(o, 99) / percentile(t, 99) for o, t in paired))
