"""Gather, write and read a metrics dump (the I/O around :mod:`local.metrics_dump`).

``make run`` calls :func:`collect` per instance once the jobs have stopped:
the metrics the job published (moto's CloudWatch), the failure topic's counts
by reason, the checkpoint's batches and the stream's arrival times, so the
report can be drawn again from the file alone (``python -m local.report_cli``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from local.metrics import cloudwatch_client, read_series
from local.metrics_dump import (
    Arrival,
    Batch,
    DumpError,
    InstanceRun,
    RunDump,
    checkpoint_batches,
    dump_from_json,
    dump_to_json,
)
from model import contract

if TYPE_CHECKING:
    from local.harness import LocalInstance
    from local.summary import Summary

DUMP_NAME: Final = "metrics.json"
# GetRecords returns at most 10,000 records per call; a call that returns
# nothing with MillisBehindLatest 0 is at the tip, and a null NextShardIterator
# means the shard is closed and read to its end.
# https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html
GET_RECORDS_LIMIT: Final = 10_000
MAX_CALLS_PER_SHARD: Final = 10_000


def read_arrivals(kinesis: Any, stream: str) -> dict[str, tuple[Arrival, ...]]:
    """Every record's sequence number and arrival time (epoch ms), per shard in
    read order, from ``TRIM_HORIZON`` to the tip."""
    shards: list[str] = []
    token: str | None = None
    while True:
        page = (
            kinesis.list_shards(NextToken=token)
            if token
            else kinesis.list_shards(StreamName=stream)
        )
        shards.extend(s["ShardId"] for s in page["Shards"])
        token = page.get("NextToken")
        if not token:
            break
    out: dict[str, tuple[Arrival, ...]] = {}
    for shard in shards:
        iterator = kinesis.get_shard_iterator(
            StreamName=stream, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records: list[Arrival] = []
        for _ in range(MAX_CALLS_PER_SHARD):
            page = kinesis.get_records(ShardIterator=iterator, Limit=GET_RECORDS_LIMIT)
            records.extend(
                (str(r["SequenceNumber"]), r["ApproximateArrivalTimestamp"].timestamp() * 1000.0)
                for r in page["Records"]
            )
            iterator = page.get("NextShardIterator")
            if not iterator or (not page["Records"] and page.get("MillisBehindLatest", 0) == 0):
                break
        else:
            raise RuntimeError(
                f"{stream}/{shard}: not at the tip after {MAX_CALLS_PER_SHARD} GetRecords calls"
            )
        out[shard] = tuple(records)
    return out


def read_checkpoint(path: Path) -> tuple[Batch, ...]:
    """The batches of a Spark checkpoint directory (``offsets/N``, ``commits/N``)."""
    offsets_dir = path / "offsets"
    if not path.is_dir():
        raise DumpError(f"checkpoint {path}: not a directory")
    if not offsets_dir.is_dir():
        raise DumpError(f"checkpoint {path}: no offsets/ directory (not a Spark checkpoint?)")
    offsets = {
        int(p.name): p.read_text(encoding="utf-8")
        for p in offsets_dir.iterdir()
        if p.name.isdigit()
    }
    commits_dir = path / "commits"
    commits = (
        {int(p.name) for p in commits_dir.iterdir() if p.name.isdigit()}
        if commits_dir.is_dir()
        else set()
    )
    try:
        return checkpoint_batches(offsets, commits)
    except DumpError as exc:
        raise DumpError(f"checkpoint {path}: {exc}") from None


def collect(local: LocalInstance, summary: Summary, end: datetime | None = None) -> InstanceRun:
    """One instance's dump entry, read from the emulators and its work dir."""
    finished = end or datetime.now(UTC)
    client = cloudwatch_client(local.config.region, local.endpoints.aws_url)
    alarms = local.instance.alarms
    return InstanceRun(
        instance=local.name,
        trigger_interval_sec=local.config.trigger_interval_sec,
        start=local.started_at,
        end=finished,
        metrics=read_series(client, local.name, local.started_at, finished),
        period_sec=1,
        failures_by_reason=dict(summary.failures_by_reason),
        thresholds={
            contract.END_TO_END_LATENCY_MS: float(alarms.end_to_end_latency_ms),
            contract.SOURCE_LAG_MS: float(alarms.iterator_age_ms),
        },
        summary=tuple(summary.lines()),
        batches=read_checkpoint(local.checkpoint),
        arrivals=read_arrivals(local.kinesis, local.config.stream_name),
    )


def write_dump(dump: RunDump, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(dump_to_json(dump), indent=1), encoding="utf-8")
    return path


def load_dump(path: Path) -> RunDump:
    """Read a dump; a missing file, bad JSON or a bad field is a :class:`DumpError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DumpError(f"metrics dump {path}: {exc.strerror or exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DumpError(f"metrics dump {path}: not JSON ({exc})") from None
    return dump_from_json(raw, f"metrics dump {path}")


def with_checkpoints(dump: RunDump, checkpoints: Sequence[tuple[str | None, Path]]) -> RunDump:
    """The dump with each named instance's batches read from a checkpoint
    directory; a checkpoint without an instance name needs a one-instance dump."""
    runs = {r.instance: r for r in dump.runs}
    for named, path in checkpoints:
        name = named
        if name is None:
            if len(runs) != 1:
                raise DumpError(
                    f"--checkpoint {path}: the dump has {len(runs)} instances "
                    f"({', '.join(runs)}); write INSTANCE=DIR"
                )
            name = next(iter(runs))
        if name not in runs:
            raise DumpError(
                f"--checkpoint {name}={path}: no instance {name!r} in the dump "
                f"(it has {', '.join(runs)})"
            )
        runs[name] = replace(runs[name], batches=read_checkpoint(path))
    return RunDump(tuple(runs.values()))
