"""The run report's numbers: chart series and figures from a metrics dump (pure).

Each chart of :mod:`local.report` draws a :class:`Series` made here, and the
page's table and alt texts show :func:`figures`; both come from the dump alone
(:mod:`local.metrics_dump`), so a re-rendered report shows the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from local.metrics_dump import Arrival, Batch, DumpError, InstanceRun, MetricPoint
from local.summary import percentile
from model import contract
from model.kinesis_offsets import ShardState

# --------------------------------------------------------------- series


@dataclass(frozen=True)
class Series:
    """One line of a chart: x in seconds since the run's start."""

    label: str
    x: tuple[float, ...]
    y: tuple[float, ...]

    def __bool__(self) -> bool:
        return bool(self.y)

    @property
    def peak(self) -> float | None:
        return max(self.y) if self.y else None


Stat = Literal["max", "mean", "sum"]
_STATS: Final[dict[str, Callable[[MetricPoint], float]]] = {
    "max": lambda p: p.maximum,
    "mean": lambda p: p.mean,
    "sum": lambda p: p.total,
}


def metric_series(run: InstanceRun, metric: str, stat: Stat, label: str = "") -> Series:
    points = run.points(metric)
    return Series(
        label or metric,
        tuple((p.at - run.start).total_seconds() for p in points),
        tuple(_STATS[stat](p) for p in points),
    )


def batch_durations(run: InstanceRun) -> Series:
    """The slowest batch of each period (one batch per period locally)."""
    return metric_series(run, contract.BATCH_DURATION_MS, "max", "batch duration (ms)")


def end_to_end_latency(run: InstanceRun) -> Series:
    return metric_series(run, contract.END_TO_END_LATENCY_MS, "max", "end-to-end latency (ms)")


def input_rate(run: InstanceRun) -> Series:
    return metric_series(run, contract.INPUT_ROWS_PER_SECOND, "mean", "input rows/s")


def processed_rate(run: InstanceRun) -> Series:
    return metric_series(run, contract.PROCESSED_ROWS_PER_SECOND, "mean", "processed rows/s")


@dataclass(frozen=True)
class LagPoint:
    """The source's lag when a batch was planned: the records that had arrived
    past where the previous batch ended (what this batch was about to read,
    and any beyond its fetch limit), and how long the oldest had waited. That
    is what ``MillisBehindLatest`` measures for a reader at the previous
    batch's end (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html)."""

    batch_id: int
    at: datetime
    records: int
    age_ms: float


def _waiting(state: ShardState | None, arrivals: Sequence[Arrival], now_ms: float) -> list[float]:
    """Arrival times (up to ``now_ms``) of the shard's records after ``state``."""
    if state is None:  # not read yet (TRIM_HORIZON) or not listed yet: all of it waits
        return [t for _, t in arrivals if t <= now_ms]
    if state.after is not None:
        index = next((i for i, (seq, _) in enumerate(arrivals) if seq == state.after), None)
        if index is None:
            raise DumpError(f"offset after={state.after} is not a record of the shard")
        return [t for _, t in arrivals[index + 1 :] if t <= now_ms]
    if state.ts is not None:  # LATEST pinned at ts: earlier records are never read
        return [t for _, t in arrivals if state.ts * 1000.0 <= t <= now_ms]
    return [t for _, t in arrivals if t <= now_ms]


def _start_offsets(batch: Batch, by_id: Mapping[int, Batch]) -> Mapping[str, ShardState] | None:
    """Where ``batch`` started reading: the previous batch's end offsets. Batch
    0 starts where the query started: a shard still pinned at a ``ts`` there
    (LATEST, nothing read yet), else the stream's start (TRIM_HORIZON, the
    default). None when the previous batch is not in the checkpoint any more."""
    if batch.batch_id == 0 and batch.shards is not None:
        return {s: st for s, st in batch.shards.items() if st.after is None and st.ts is not None}
    previous = by_id.get(batch.batch_id - 1)
    return previous.shards if previous is not None else None


def lag_from_checkpoint(
    batches: Sequence[Batch], arrivals: Mapping[str, Sequence[Arrival]]
) -> tuple[LagPoint, ...]:
    """Source lag at each batch's planned time, from the checkpoint's offsets
    and the stream's arrival times. Records are compared by their position in
    the shard's read order, not by sequence-number value (Kinesis only says
    sequence numbers "generally increase over time":
    https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecord.html)."""
    by_id = {b.batch_id: b for b in batches}
    points = []
    for batch in batches:
        start = _start_offsets(batch, by_id)
        if batch.shards is None or start is None:
            continue
        now_ms = batch.planned_at.timestamp() * 1000.0
        waiting: list[float] = []
        for shard, records in sorted(arrivals.items()):
            try:
                waiting.extend(_waiting(start.get(shard), records, now_ms))
            except DumpError as exc:
                raise DumpError(f"batch {batch.batch_id}, shard {shard}: {exc}") from None
        age = max(0.0, now_ms - min(waiting)) if waiting else 0.0
        points.append(LagPoint(batch.batch_id, batch.planned_at, len(waiting), age))
    return tuple(points)


@dataclass(frozen=True)
class SourceLag:
    """The lag chart's series and where they come from."""

    origin: Literal["metric", "checkpoint", "none"]
    age: Series
    records: Series
    note: str


def source_lag(run: InstanceRun) -> SourceLag:
    """``SourceLagMs`` when the source reports it; else derived from the
    checkpoint and the stream's arrivals; else nothing, with the reason."""
    metric = metric_series(run, contract.SOURCE_LAG_MS, "max", "source lag (ms)")
    empty = Series("records waiting", (), ())
    if metric:
        return SourceLag("metric", metric, empty, f"{contract.SOURCE_LAG_MS}, as published")
    if not run.batches or not run.arrivals:
        missing = "batches (a checkpoint)" if not run.batches else "the stream's arrivals"
        return SourceLag(
            "none",
            Series("source lag (ms)", (), ()),
            empty,
            f"no {contract.SOURCE_LAG_MS} published (the python-kinesis source reports none) "
            f"and the dump has no {missing} to derive it from",
        )
    try:
        points = lag_from_checkpoint(run.batches, run.arrivals)
    except DumpError as exc:
        return SourceLag(
            "none",
            Series("source lag (ms)", (), ()),
            empty,
            f"the checkpoint does not match the stream's records: {exc}",
        )
    xs = tuple((p.at - run.start).total_seconds() for p in points)
    return SourceLag(
        "checkpoint",
        Series("age of the oldest waiting record (ms)", xs, tuple(p.age_ms for p in points)),
        Series("records waiting", xs, tuple(float(p.records) for p in points)),
        "derived: at each batch's planned time, the records that had arrived past the "
        "previous batch's end offsets (checkpoint offsets vs Kinesis arrival times)",
    )


def failures_by_reason(run: InstanceRun) -> dict[str, int]:
    """Distinct failure records per reason from the topic; without the topic,
    the ``FailureRecords`` total under ``all reasons``."""
    if run.failures_by_reason is not None:
        return dict(sorted(run.failures_by_reason.items()))
    total = int(sum(p.total for p in run.points(contract.FAILURE_RECORDS)))
    return {"all reasons (FailureRecords metric)": total} if total else {}


# -------------------------------------------------------------- figures


@dataclass(frozen=True)
class Figures:
    """The numbers the report's table and the charts' alt texts show."""

    batches_committed: int | None
    batches_measured: int
    trigger_ms: float
    batch_p50_ms: float | None
    batch_max_ms: float | None
    over_trigger: int
    latency_max_ms: float | None
    lag_max_ms: float | None
    lag_max_records: int | None
    lag_origin: str
    input_rows: int
    input_rate_max: float | None
    processed_rate_max: float | None
    failure_records_metric: int
    failures_by_reason: dict[str, int]

    @property
    def failures_total(self) -> int:
        return sum(self.failures_by_reason.values())


def figures(run: InstanceRun) -> Figures:
    durations = batch_durations(run)
    trigger_ms = run.trigger_interval_sec * 1000.0
    lag = source_lag(run)
    return Figures(
        batches_committed=sum(1 for b in run.batches if b.committed) if run.batches else None,
        batches_measured=int(sum(p.count for p in run.points(contract.BATCH_DURATION_MS))),
        trigger_ms=trigger_ms,
        batch_p50_ms=percentile(durations.y, 50),
        batch_max_ms=durations.peak,
        over_trigger=sum(1 for v in durations.y if v > trigger_ms),
        latency_max_ms=end_to_end_latency(run).peak,
        lag_max_ms=lag.age.peak,
        lag_max_records=int(lag.records.peak) if lag.records.peak is not None else None,
        lag_origin=lag.origin,
        input_rows=int(sum(p.total for p in run.points(contract.INPUT_ROWS))),
        input_rate_max=input_rate(run).peak,
        processed_rate_max=processed_rate(run).peak,
        failure_records_metric=int(sum(p.total for p in run.points(contract.FAILURE_RECORDS))),
        failures_by_reason=failures_by_reason(run),
    )
