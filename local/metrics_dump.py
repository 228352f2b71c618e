"""The metrics dump: what a run published and left behind, as JSON (pure).

A *metrics dump* is what one run published and what it left behind, as JSON,
so the report can be drawn again later, elsewhere, or from another run's
checkpoint. ``make run`` writes one (``<work dir>/metrics.json``);
``python -m local.report_cli`` renders any dump. The format
(``"format": "streaming-run-metrics"``, ``"version": 1``)::

    {"format": "streaming-run-metrics", "version": 1,
     "instances": [{
       "instance": "orders-ap-northeast-2",
       "trigger_interval_sec": 2,
       "window": {"start": "2026-01-01T10:00:00+00:00", "end": "...+00:00"},
       "period_sec": 1,
       "metrics": {"BatchDurationMs": [{"at": "...", "count": 1, "sum": 812.0, "max": 812.0}]},
       "failures_by_reason": {"malformed_json": 17},          (optional: the failure topic)
       "thresholds": {"EndToEndLatencyMs": 120000},             (optional: the alarms)
       "summary": ["instance orders-ap-northeast-2", "..."],   (optional: make run's verdict)
       "batches": [{"id": 0, "planned_at": "...", "committed": true,
                    "shards": {"shardId-000000000000": {"after": "500", "ts": null,
                                                        "done": false}}}],  (optional)
       "arrivals": {"shardId-000000000000": [["1", 1767261600123.0]]}}]}  (optional)

``metrics`` holds, per metric of :data:`model.contract.ALL_METRICS`, one point per
CloudWatch period (SampleCount, Sum, Maximum), as ``GetMetricStatistics``
returns them; ``batches`` is the checkpoint (``offsets/N`` and ``commits/N``),
each batch's ``shards`` being where it ended (:func:`checkpoint_batches`);
``arrivals`` is each shard's records in read order with their Kinesis arrival
time (epoch ms), which with the batches' offsets gives the source lag when the
source reports none (the ``python-kinesis`` source publishes no
``SourceLagMs``).

Nothing here reads a file: :mod:`local.run_dump` gathers, writes and reads a
dump; :mod:`local.report_data` turns one into chart series and figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from model import contract
from model.kinesis_offsets import ShardState

DUMP_FORMAT: Final = "streaming-run-metrics"
DUMP_VERSION: Final = 1

# (sequence number, Kinesis arrival time in epoch ms), in the shard's read order.
Arrival = tuple[str, float]


class DumpError(ValueError):
    """A metrics dump or checkpoint that does not have the documented shape."""


@dataclass(frozen=True)
class MetricPoint:
    """One CloudWatch period of one metric."""

    at: datetime
    count: float
    total: float
    maximum: float

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass(frozen=True)
class Batch:
    """One micro-batch as the checkpoint records it. ``shards`` is None when the
    offsets are not the ``python-kinesis`` source's (the EMR connector's)."""

    batch_id: int
    planned_at: datetime
    committed: bool
    shards: Mapping[str, ShardState] | None


@dataclass(frozen=True)
class InstanceRun:
    """Everything the report shows about one instance."""

    instance: str
    trigger_interval_sec: int
    start: datetime
    end: datetime
    metrics: Mapping[str, tuple[MetricPoint, ...]]
    period_sec: int = 1
    failures_by_reason: Mapping[str, int] | None = None
    thresholds: Mapping[str, float] = field(default_factory=dict)
    summary: tuple[str, ...] = ()
    batches: tuple[Batch, ...] = ()
    arrivals: Mapping[str, tuple[Arrival, ...]] | None = None

    def points(self, metric: str) -> tuple[MetricPoint, ...]:
        return self.metrics.get(metric, ())


@dataclass(frozen=True)
class RunDump:
    runs: tuple[InstanceRun, ...]

    def instances(self) -> list[str]:
        return [r.instance for r in self.runs]


# ---------------------------------------------------------------- JSON


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def dump_to_json(dump: RunDump) -> dict[str, Any]:
    return {
        "format": DUMP_FORMAT,
        "version": DUMP_VERSION,
        "instances": [_run_to_json(r) for r in dump.runs],
    }


def _run_to_json(run: InstanceRun) -> dict[str, Any]:
    out: dict[str, Any] = {
        "instance": run.instance,
        "trigger_interval_sec": run.trigger_interval_sec,
        "window": {"start": _iso(run.start), "end": _iso(run.end)},
        "period_sec": run.period_sec,
        "metrics": {
            name: [
                {"at": _iso(p.at), "count": p.count, "sum": p.total, "max": p.maximum}
                for p in points
            ]
            for name, points in run.metrics.items()
        },
        "thresholds": dict(run.thresholds),
        "summary": list(run.summary),
        "batches": [
            {
                "id": b.batch_id,
                "planned_at": _iso(b.planned_at),
                "committed": b.committed,
                "shards": None
                if b.shards is None
                else {s: st.to_json() for s, st in sorted(b.shards.items())},
            }
            for b in run.batches
        ],
    }
    if run.failures_by_reason is not None:
        out["failures_by_reason"] = dict(run.failures_by_reason)
    if run.arrivals is not None:
        out["arrivals"] = {s: [list(a) for a in arr] for s, arr in sorted(run.arrivals.items())}
    return out


def _need(raw: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in raw:
        raise DumpError(f"{where}.{key}: missing (the dump format: local/metrics_dump.py)")
    return raw[key]


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DumpError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise DumpError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DumpError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _int(value: Any, where: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DumpError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def _time(value: Any, where: str) -> datetime:
    if not isinstance(value, str):
        raise DumpError(f"{where}: expected an ISO-8601 time with offset, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise DumpError(f"{where}: expected an ISO-8601 time with offset, got {value!r}") from None
    if parsed.tzinfo is None:
        raise DumpError(f"{where}: {value!r} has no UTC offset")
    return parsed.astimezone(UTC)


def dump_from_json(raw: Any, source: str = "metrics dump") -> RunDump:
    """Parse and check a dump; errors name the source and the field, e.g.
    ``metrics dump x.json: instances[0].metrics.BatchDurationMs[2].max: ...``."""
    try:
        return _dump(raw)
    except DumpError as exc:
        raise DumpError(f"{source}: {exc}") from None


def _dump(raw: Any) -> RunDump:
    top = _mapping(raw, "the top level")
    if top.get("format") != DUMP_FORMAT:
        raise DumpError(f"format: expected {DUMP_FORMAT!r}, got {top.get('format')!r}")
    if top.get("version") != DUMP_VERSION:
        raise DumpError(f"version: expected {DUMP_VERSION}, got {top.get('version')!r}")
    if "instances" not in top:
        raise DumpError("instances: missing (the dump format: local/metrics_dump.py)")
    items = _list(top["instances"], "instances")
    runs = tuple(
        _run_from_json(_mapping(item, f"instances[{i}]"), f"instances[{i}]")
        for i, item in enumerate(items)
    )
    if not runs:
        raise DumpError("instances: empty; expected at least one instance")
    names = [r.instance for r in runs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DumpError(f"instances: {', '.join(twice)} listed more than once")
    return RunDump(runs)


def _run_from_json(raw: Mapping[str, Any], where: str) -> InstanceRun:
    instance = _need(raw, "instance", where)
    if not isinstance(instance, str) or not instance:
        raise DumpError(f"{where}.instance: expected a non-empty string, got {instance!r}")
    window = _mapping(_need(raw, "window", where), f"{where}.window")
    start = _time(_need(window, "start", f"{where}.window"), f"{where}.window.start")
    end = _time(_need(window, "end", f"{where}.window"), f"{where}.window.end")
    if end < start:
        raise DumpError(f"{where}.window: end {end.isoformat()} is before start")
    metrics_raw = _mapping(_need(raw, "metrics", where), f"{where}.metrics")
    metrics: dict[str, tuple[MetricPoint, ...]] = {}
    for name, points in metrics_raw.items():
        here = f"{where}.metrics.{name}"
        if name not in contract.ALL_METRICS:
            raise DumpError(
                f"{here}: unknown metric; expected one of {', '.join(contract.ALL_METRICS)}"
            )
        metrics[name] = tuple(
            sorted(
                (_point(p, f"{here}[{i}]") for i, p in enumerate(_list(points, here))),
                key=lambda p: p.at,
            )
        )
    reasons = raw.get("failures_by_reason")
    failures = None
    if reasons is not None:
        failures = {
            str(k): _int(v, f"{where}.failures_by_reason.{k}")
            for k, v in _mapping(reasons, f"{where}.failures_by_reason").items()
        }
    thresholds = {
        str(k): _number(v, f"{where}.thresholds.{k}")
        for k, v in _mapping(raw.get("thresholds") or {}, f"{where}.thresholds").items()
    }
    summary = tuple(str(line) for line in _list(raw.get("summary") or [], f"{where}.summary"))
    batches = tuple(
        _batch(b, f"{where}.batches[{i}]")
        for i, b in enumerate(_list(raw.get("batches") or [], f"{where}.batches"))
    )
    arrivals_raw = raw.get("arrivals")
    arrivals = None
    if arrivals_raw is not None:
        arrivals = {
            str(shard): tuple(
                _arrival(a, f"{where}.arrivals.{shard}[{i}]")
                for i, a in enumerate(_list(records, f"{where}.arrivals.{shard}"))
            )
            for shard, records in _mapping(arrivals_raw, f"{where}.arrivals").items()
        }
    return InstanceRun(
        instance=instance,
        trigger_interval_sec=_int(
            _need(raw, "trigger_interval_sec", where), f"{where}.trigger_interval_sec", 1
        ),
        start=start,
        end=end,
        metrics=metrics,
        period_sec=_int(raw.get("period_sec", 1), f"{where}.period_sec", 1),
        failures_by_reason=failures,
        thresholds=thresholds,
        summary=summary,
        batches=tuple(sorted(batches, key=lambda b: b.batch_id)),
        arrivals=arrivals,
    )


def _point(raw: Any, where: str) -> MetricPoint:
    item = _mapping(raw, where)
    return MetricPoint(
        at=_time(_need(item, "at", where), f"{where}.at"),
        count=_number(_need(item, "count", where), f"{where}.count"),
        total=_number(_need(item, "sum", where), f"{where}.sum"),
        maximum=_number(_need(item, "max", where), f"{where}.max"),
    )


def _batch(raw: Any, where: str) -> Batch:
    item = _mapping(raw, where)
    shards_raw = item.get("shards")
    shards = None
    if shards_raw is not None:
        shards = {
            str(s): ShardState.from_json(_mapping(st, f"{where}.shards.{s}"))
            for s, st in _mapping(shards_raw, f"{where}.shards").items()
        }
    committed = item.get("committed", False)
    if not isinstance(committed, bool):
        raise DumpError(f"{where}.committed: expected true or false, got {committed!r}")
    return Batch(
        batch_id=_int(_need(item, "id", where), f"{where}.id"),
        planned_at=_time(_need(item, "planned_at", where), f"{where}.planned_at"),
        committed=committed,
        shards=shards,
    )


def _arrival(raw: Any, where: str) -> Arrival:
    pair = _list(raw, where)
    if len(pair) != 2 or not isinstance(pair[0], str):
        raise DumpError(f"{where}: expected [sequence number (string), arrival epoch ms]")
    return pair[0], _number(pair[1], f"{where}[1]")


# ------------------------------------------------------------ checkpoint


def parse_offsets_file(text: str, where: str) -> tuple[datetime, Mapping[str, ShardState] | None]:
    """Spark's ``offsets/N``: a version line, the batch metadata (its
    ``batchTimestampMs`` is when the batch was planned), then one line per
    source. Returns the planned time and the ``python-kinesis`` shard states
    (None for another source's offsets)."""
    planned, shards, _starts = _offsets_file(text, where)
    return planned, shards


def _offsets_file(text: str, where: str) -> tuple[datetime, Mapping[str, ShardState] | None, bool]:
    """:func:`parse_offsets_file`, and whether its shard states are where the
    batch *starts*: a ``{"v": 2, ...}`` offset of the executor-side reader
    (model/kinesis_plan.py: its batch's ends are recorded elsewhere, and
    are where the next batch starts). An offset without ``"v"`` (the earlier
    driver-side reader) holds where its batch ended."""
    lines = text.splitlines()
    if len(lines) < 3:
        raise DumpError(f"{where}: expected a version line, the metadata and a source offset")
    try:
        metadata = json.loads(lines[1])
        source = json.loads(lines[2])
    except json.JSONDecodeError as exc:
        raise DumpError(f"{where}: not JSON ({exc})") from None
    stamp = _number(
        _need(_mapping(metadata, f"{where} metadata"), "batchTimestampMs", where),
        f"{where} batchTimestampMs",
    )
    planned = datetime.fromtimestamp(stamp / 1000.0, tz=UTC)
    shards_raw = source.get("shards") if isinstance(source, Mapping) else None
    if not isinstance(shards_raw, Mapping):
        return planned, None, False
    shards = {
        str(s): ShardState.from_json(_mapping(st, f"{where} shards.{s}"))
        for s, st in shards_raw.items()
    }
    return planned, shards, "v" in source


def checkpoint_batches(offsets: Mapping[int, str], commits: set[int]) -> tuple[Batch, ...]:
    """The batches of a checkpoint from its ``offsets/N`` texts and the ids in
    ``commits/``, each with where it *ended* (:class:`Batch`). A v2 offset
    says where its batch starts, so batch N's end is offsets/N+1's start; the
    last batch's ends are only in the reader's recorded ends, so its start
    stands in (it is what the next batch, not yet planned, would start from
    if it read nothing)."""
    ids = sorted(offsets)
    parsed = {i: _offsets_file(offsets[i], f"offsets/{i}") for i in ids}
    batches = []
    for batch_id in ids:
        planned, shards, starts = parsed[batch_id]
        following = parsed.get(batch_id + 1)
        if starts and following is not None and following[1] is not None:
            shards = following[1]
        batches.append(Batch(batch_id, planned, batch_id in commits, shards))
    return tuple(batches)
