"""What ``status`` found, and how it is printed (text for people, JSON for scripts). Pure."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from infra.supervisor.status import SupervisorStatus
from scripts.status.checkpoint import CheckpointState
from scripts.status.kinesis import Lag, ShardStatus
from scripts.status.lease import JobState
from scripts.status.metrics import COLUMNS, AlarmState, BatchRow
from scripts.status.optimizers import ADVICE, Optimizers
from scripts.status.table import SnapshotFigures
from scripts.status.undeclared import KeyCount, undeclared_lines


@dataclass(frozen=True)
class StatusReport:
    instance: str
    origin: str
    at: datetime
    stream: str
    region: str
    job: JobState
    checkpoint: CheckpointState
    shards: list[ShardStatus]
    untracked_shards: list[str]  # in the committed offset, no longer listed by Kinesis
    batches: list[BatchRow]
    metrics_period_sec: int
    metrics_minutes: float
    alarm_prefix: str
    alarms: list[AlarmState]
    table_name: str
    table: SnapshotFigures | None  # None: the table does not exist yet
    optimizers: Optimizers
    supervisor: SupervisorStatus | None = None
    # Keys events carry beyond job.event_fields (scripts/status/undeclared.py).
    undeclared: list[KeyCount] = field(default_factory=list)

    @property
    def total_lag(self) -> Lag:
        lags = [s.lag for s in self.shards]
        exact = all(lag.exact for lag in lags)
        estimates = [lag.estimate if not lag.exact else lag.records for lag in lags]
        known = all(e is not None for e in estimates)
        return Lag(
            records=sum(lag.records for lag in lags),
            exact=exact,
            estimate=None if exact or not known else sum(e or 0 for e in estimates),
            behind_ms=max((lag.behind_ms or 0 for lag in lags), default=0),
            oldest_unread_age_ms=max((lag.oldest_unread_age_ms for lag in lags), default=0),
        )


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def to_json(report: StatusReport) -> str:
    raw = dataclasses.asdict(report)
    raw["total_lag"] = dataclasses.asdict(report.total_lag)
    for state, plain in zip(report.optimizers.states, raw["optimizers"]["states"], strict=True):
        plain["flags"] = state.flags
    return json.dumps(_plain(raw), indent=1, sort_keys=True)


# ----------------------------------------------------------------------------- text


def number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}"


def ago(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "-"
    seconds = max(0, int((now - at).total_seconds()))
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60}s ago"
    return f"{seconds // 3600}h {seconds % 3600 // 60}m ago"


def stamp(at: datetime | None) -> str:
    return "-" if at is None else f"{at:%Y-%m-%d %H:%M:%S}Z"


def lag_records(lag: Lag) -> str:
    if lag.exact:
        return number(lag.records)
    if lag.estimate is None:
        return f">={number(lag.records)} (no rate to estimate)"
    return f">={number(lag.records)} (~{number(lag.estimate)} est.)"


def columns(headers: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned first column, right-aligned others, widths from the data."""
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        parts = [
            str(c).ljust(w) if i == 0 else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return (indent + "  ".join(parts)).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def shard_lines(report: StatusReport) -> list[str]:
    rows = [
        [
            s.shard.shard_id + (" (closed)" if s.shard.closed else ""),
            s.tip or "-",
            s.committed.describe(),
            lag_records(s.lag),
            number(s.lag.behind_ms),
            number(s.lag.oldest_unread_age_ms),
        ]
        for s in report.shards
    ]
    total = report.total_lag
    rows.append(
        [
            "total",
            "",
            "",
            lag_records(total),
            number(total.behind_ms),
            number(total.oldest_unread_age_ms),
        ]
    )
    lines = columns(
        ["shard", "tip", "committed", "lag records", "ms behind tip", "oldest unread age ms"], rows
    )
    notes = sorted({s.tip_note for s in report.shards if s.tip_note != "read to the tip"})
    lines += [f"  tip: {note}" for note in notes]
    if report.untracked_shards:
        lines.append(
            "  in the committed offset but no longer listed by Kinesis (expired): "
            + ", ".join(report.untracked_shards)
        )
    if not total.exact:
        lines.append("  lag: backlog larger than the scan; '~' extrapolates the arrival rate")
    return lines


def checkpoint_lines(report: StatusReport) -> list[str]:
    cp = report.checkpoint
    if cp.batches.committed is None:
        line = f"checkpoint {cp.location}: no batch committed yet"
    else:
        line = (
            f"checkpoint {cp.location}: batch {cp.batches.committed} committed "
            f"{stamp(cp.committed_at)} ({ago(cp.committed_at, report.at)})"
        )
    if cp.batches.planned is not None:
        line += f"; batch {cp.batches.planned} planned, not committed (running)"
    lines = [line]
    if cp.offset is not None:
        kind = "its end (exact)" if cp.offset.is_batch_end else "its start (lag is an upper bound)"
        lines.append(f"  offsets: {cp.offset.format}, the committed batch's offset is {kind}")
    return lines


BATCH_HEADERS = {
    "batches": "batches",
    "duration_ms": "duration ms",
    "input_rows": "rows in",
    "input_rows_per_sec": "in/s",
    "processed_rows_per_sec": "processed/s",
    "failure_records": "failures",
    "end_to_end_latency_ms": "e2e latency ms",
    "source_lag_ms": "source lag ms",
    "scheduling_delay_ratio": "sched. delay",
}


def batch_lines(report: StatusReport) -> list[str]:
    head = (
        f"last batches (CloudWatch, {report.metrics_period_sec}s periods, "
        f"last {report.metrics_minutes:g} min)"
    )
    if not report.batches:
        return [head, "  no batch published in that window"]
    names = [column for column, _, _ in COLUMNS]
    digits = {"scheduling_delay_ratio": 2, "input_rows_per_sec": 1, "processed_rows_per_sec": 1}
    rows = [
        [f"{row.at:%H:%M:%S}", *(number(row.values.get(n), digits.get(n, 0)) for n in names)]
        for row in report.batches
    ]
    return [head, *columns(["time (UTC)", *(BATCH_HEADERS[n] for n in names)], rows)]


def alarm_lines(report: StatusReport) -> list[str]:
    head = f"alarms (prefix {report.alarm_prefix})"
    if not report.alarms:
        return [head, "  none found (alarms exist once the instance's stack is deployed)"]
    rows = [[a.name, a.state, ago(a.since, report.at)] for a in report.alarms]
    return [head, *columns(["alarm", "state", "since"], rows)]


def table_lines(report: StatusReport) -> list[str]:
    figures = report.table
    if figures is None:
        return [f"table {report.table_name}: not created yet"]
    if figures.snapshot_id is None:
        return [f"table {report.table_name}: no snapshot yet"]
    batch = "-" if figures.batch_id is None else str(figures.batch_id)
    return [
        f"table {figures.table}: last snapshot {figures.snapshot_id}",
        f"  at {stamp(figures.at)} ({ago(figures.at, report.at)}), {figures.operation}, "
        f"batch {batch}",
        f"  added {number(figures.added_records)} records in {number(figures.added_files)} "
        f"files; total {number(figures.total_records)} records in "
        f"{number(figures.total_files)} files; {figures.snapshots} snapshots kept",
    ]


def optimizer_lines(report: StatusReport) -> list[str]:
    found = report.optimizers
    head = f"table optimizers (Glue, {report.table_name})"
    if not found.available:
        return [f"{head}: {found.note}"]
    rows = []
    for state in found.states:
        run = state.last_run
        enabled = "-" if state.enabled is None else ("yes" if state.enabled else "NO")
        rows.append(
            [
                state.type,
                enabled,
                "-" if run is None else run.status,
                "-" if run is None else stamp(run.started),
                "-" if run is None else stamp(run.ended),
                ", ".join(state.flags).upper() or "ok",
            ]
        )
    lines = [
        head,
        *columns(["optimizer", "enabled", "last run", "started", "ended", "state"], rows),
    ]
    for state in found.states:
        if state.problem:
            lines.append(f"  {state.type}: {state.problem}")
        if state.last_run is not None and state.last_run.error:
            lines.append(f"  {state.type}: last error: {state.last_run.error}")
        for flag in state.flags:
            lines.append(f"  {state.type} {flag}: {ADVICE[flag]}")
    return lines


def format_report(report: StatusReport) -> str:
    live_shards = sum(not s.shard.closed for s in report.shards)
    lines = [
        f"status of {report.instance} at {stamp(report.at)}",
        f"config     {report.origin}",
        f"job        {report.job.line()}",
        *(report.supervisor.lines() if report.supervisor is not None else []),
        f"stream     {report.stream} ({report.region}): {live_shards} open shard(s), "
        f"{len(report.shards) - live_shards} closed",
        *checkpoint_lines(report),
        "",
        *shard_lines(report),
        "",
        *batch_lines(report),
        "",
        *undeclared_lines(report.undeclared, report.metrics_minutes),
        "",
        *alarm_lines(report),
        "",
        *table_lines(report),
        "",
        *optimizer_lines(report),
    ]
    return "\n".join(lines)
