"""Latency: from a record's put to its row being readable in the table.

A producer (a process of its own) puts the job's record mix (2 % malformed,
5 % re-sent ids) on a 2-shard Kinesis stream (moto) at a steady 1,000
records/s: one ``PutRecords`` of 100 records every 0.1 s, through the
producer's own ``put_all``. The job's
streaming query runs in this process exactly as ``job.query`` builds it:
``read_stream`` (the ``python-kinesis`` source) -> ``prepare`` ->
``foreachBatch(BatchProcessor)``, with a 1 s processing-time trigger.

* put time: when the ``PutRecords`` call carrying the record was issued;
* readable time: when a reader polling the table's catalog (pyiceberg, every
  0.2 s) first saw the snapshot that holds the row (each snapshot carries its
  batch id; each row its ``batch_id``), so the figure includes the catalog
  pointer swap a user's query waits for; the poll interval bounds its error;
* latency of an id: readable - put, for the first put of each valid id
  (failure records and re-sends are put but not measured).

A warm-up (200 records, waited for) starts the query's Python workers and
catalog first; then the measured run produces for ``repeats`` consecutive
windows of 60 s (quick: one of 5 s), and each window's p50/p99 is a repeat.

Baseline, in the same run on the same stream: a bare consumer, one boto3
GetRecords loop over both shards from ``LATEST`` polling every 0.2 s (Kinesis
allows 5 GetRecords calls per second per shard), which decodes each record's
id: put -> seen by the simplest reader. ratio = our p99 / the loop's p99 in
the same window (median of the windows): how much the micro-batch adds over
reading the stream. Bar: p99 < 5 s (median of the windows). The
producer shares the machine (and this process) with the job: the rate it
achieved is reported.

``bench.latency_efo`` runs this same benchmark with the job's source on
enhanced fan-out and the bare EFO loop as baseline (a :class:`Kind` each).

The stream lives on a moto server of its own (``local.moto_server``, the
harness's: its shard patch makes a read during a put safe and keeps reads and
puts O(log n) as the shards grow), so no other benchmark's streams share it.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from bench import framework
from bench.framework import Context
from bench.latency_figures import Windows, batch_figures, job_split, stats
from bench.latency_job import (
    TABLE_POLL_SEC,
    JobSplit,
    TableWatcher,
    start_job_query,
    wait_rows,
)
from bench.latency_produce import STREAM, produce, produce_elsewhere
from bench.read_loops import Loop, poll_loops, raise_failed, seen_by
from bench.stream import job_config, progress_events
from local.emulators import LOOPBACK, start_moto
from producer.events import MixSpec, expected_ids, generate, now_utc
from producer.stream_writer import ensure_stream, kinesis_client

if TYPE_CHECKING:
    from model.config import JobConfig
    from producer.events import SampleRecord

NAME: Final = "latency"
BAR_P99_SEC: Final = 5.0
SHARDS: Final = 2
RATE: Final = 1_000  # records per second
TRIGGER_SEC: Final = 1
WARM_UP_RECORDS: Final = 200
DRAIN_TIMEOUT_SEC: Final = 300.0
# A backlog drains at 100 records/s at least, or the run fails.
DRAIN_RECORDS_PER_SEC: Final = 100


@contextlib.contextmanager
def own_moto() -> Iterator[str]:
    """A moto server for this benchmark (its URL), stopped at the end."""
    server = start_moto()
    try:
        yield f"http://{LOOPBACK}:{server.port}"
    finally:
        server.stop()


@contextlib.contextmanager
def _moto_only() -> Iterator[tuple[str, str]]:
    """:func:`own_moto`'s URL as both where records are put and where the job reads."""
    with own_moto() as url:
        yield url, url


@dataclass(frozen=True)
class Kind:
    """What differs between the polling and the enhanced fan-out runs; the
    rest of the benchmark (producer, query, table watcher, figures) is one."""

    name: str  # the benchmark's name: results/<name>.json
    what: str  # how it is measured, for the JSON (and so docs/benchmarks.md)
    source: Mapping[str, str]  # the job's ``source`` settings
    label: str  # the baseline, in rows and charts
    baseline: str  # what the baseline measures, for the JSON
    # -> (moto URL: records are put there, the job's kinesis_endpoint_url)
    servers: Callable[[], AbstractContextManager[tuple[str, str]]]
    # (client on moto, the job's endpoint, stream) -> started loops
    loops: Callable[[Any, str, str], AbstractContextManager[Sequence[Loop]]]
    # The job's endpoint -> what the result adds about it (read while it runs).
    facts: Callable[[str], Mapping[str, Any]] = lambda _endpoint: {}


POLLING: Final = Kind(
    name=NAME,
    what=__doc__ or NAME,
    source={},
    label="bare GetRecords loop",
    baseline="put -> seen by a bare boto3 GetRecords loop (0.2 s poll), same stream",
    servers=_moto_only,
    loops=lambda client, _endpoint, stream: poll_loops(client, stream),
)


@dataclass(frozen=True)
class Plan:
    """One run's settings: the stream's client, the job's config, the records."""

    kind: Kind
    endpoint: str  # moto: where records are put
    job_endpoint: str  # where the job (and the bare loop) reads
    client: Any
    config: JobConfig
    warm: list[SampleRecord]
    measured: list[SampleRecord]
    windows: int
    window_sec: int


@dataclass(frozen=True)
class Observed:
    """What one run saw: put times, when each id became readable (table) and
    was seen (bare loop), the measured batches and the job's own split."""

    warm_up_seconds: float
    warm_batches: int
    produced_started: float
    production_seconds: float
    puts: dict[str, float]
    readable: dict[str, float]
    seen_by_loop: dict[str, float]
    events: list[dict[str, Any]]
    split: dict[str, float]
    polls: int
    poll_seconds: float


def run(ctx: Context) -> None:
    measure(ctx, POLLING)


def measure(ctx: Context, kind: Kind) -> None:
    """The benchmark for one kind of reading (``bench.latency_efo`` runs EFO)."""
    windows, window_sec = (1, 5) if ctx.quick else (ctx.repeats, 60)
    with kind.servers() as (endpoint, job_endpoint):
        _run(ctx, kind, endpoint, job_endpoint, windows=windows, window_sec=window_sec)


def _run(
    ctx: Context, kind: Kind, endpoint: str, job_endpoint: str, *, windows: int, window_sec: int
) -> None:
    plan = _plan(ctx, kind, endpoint, job_endpoint, windows=windows, window_sec=window_sec)
    load_before = framework.machine_load()
    seen = _observe(ctx, plan)
    load_after = framework.machine_load()
    found = Windows.split(
        seen.puts,
        seen.readable,
        seen.seen_by_loop,
        started=seen.produced_started,
        windows=windows,
        window_sec=window_sec,
    )
    result = _result(plan, seen, found)
    framework.write_result(
        ctx,
        kind.name,
        {
            **result,
            "code": framework.code_version(),
            "load_before": load_before,
            "load_after": load_after,
        },
    )
    _chart(ctx, kind, found)


def _plan(
    ctx: Context, kind: Kind, endpoint: str, job_endpoint: str, *, windows: int, window_sec: int
) -> Plan:
    """The stream (created), the job's config and the warm-up and measured records."""
    client = kinesis_client(framework.REGION, endpoint)
    ensure_stream(client, STREAM, SHARDS)
    config = job_config(
        ctx,
        kind.name,
        stream_name=STREAM,
        trigger_interval_sec=TRIGGER_SEC,
        kinesis_endpoint_url=job_endpoint,
        metrics={"enabled": False},
        source=dict(kind.source),
    )
    warm = generate(MixSpec(count=WARM_UP_RECORDS, id_prefix="warm", seed=3), now_utc())
    measured = generate(
        MixSpec(count=RATE * window_sec * windows, id_prefix="lat", seed=11), now_utc()
    )
    return Plan(kind, endpoint, job_endpoint, client, config, warm, measured, windows, window_sec)


def _observe(ctx: Context, plan: Plan) -> Observed:
    """The job's query and the table watcher; the warm-up, waited for; then the
    bare loops and the producer, until every measured row is in the table."""
    split = JobSplit()
    with split.attached():
        query = start_job_query(ctx.spark, plan.config)
        watcher = TableWatcher(plan.config)
        watcher.start()
        baseline = contextlib.ExitStack()
        loops: Sequence[Loop] = ()
        try:
            warm_started = time.monotonic()
            produce(plan.client, plan.warm, RATE, {})
            wait_rows(query, watcher, len(expected_ids(plan.warm)), DRAIN_TIMEOUT_SEC)
            warm_up_seconds = time.monotonic() - warm_started
            warm_batches = max((int(e["batchId"]) for e in progress_events(query)), default=-1)
            loops = baseline.enter_context(plan.kind.loops(plan.client, plan.job_endpoint, STREAM))
            produced_started, production_seconds, puts = produce_elsewhere(
                framework.REGION, plan.endpoint, plan.measured, RATE
            )
            total = len(expected_ids(plan.warm)) + len(expected_ids(plan.measured))
            wait_rows(query, watcher, total, DRAIN_TIMEOUT_SEC + total / DRAIN_RECORDS_PER_SEC)
            watcher.poll()
            events = [e for e in progress_events(query) if int(e["batchId"]) > warm_batches]
        finally:
            watcher.stop.set()
            baseline.close()
            query.stop()
    watcher.join(10)
    raise_failed(loops)
    rows = watcher.table.scan(selected_fields=("id", "batch_id")).to_arrow().to_pylist()
    batch_seen = watcher.batches.snapshot()
    return Observed(
        warm_up_seconds=warm_up_seconds,
        warm_batches=warm_batches,
        produced_started=produced_started,
        production_seconds=production_seconds,
        puts=puts,
        readable={str(r["id"]): batch_seen[str(r["batch_id"])] for r in rows},
        seen_by_loop=seen_by(loops),
        events=events,
        split=job_split(split.seconds, warm_batches),
        polls=watcher.polls,
        poll_seconds=watcher.poll_seconds,
    )


def _result(plan: Plan, seen: Observed, found: Windows) -> dict[str, Any]:
    """The result's figures (``framework.write_result`` adds the machine's)."""
    kind = plan.kind
    all_theirs = found.all_theirs
    return {
        "what": kind.what,
        "source": dict(kind.source),
        "repeats": plan.windows,
        "rate_records_per_second": RATE,
        "achieved_rate_records_per_second": round(_achieved(plan, seen), 1),
        "window_seconds": plan.window_sec,
        "windows": plan.windows,
        "shards": SHARDS,
        "trigger_interval_sec": TRIGGER_SEC,
        "table_poll_interval_sec": TABLE_POLL_SEC,
        "records_put": len(plan.measured),
        "ids_measured": len(found.all_ours),
        "warm_up": {"records": WARM_UP_RECORDS, "seconds": round(seen.warm_up_seconds, 1)},
        "subject": {
            "what": "put -> row readable in the table (job's query, 1 s trigger)",
            "p50_seconds": framework.summary(found.p50s),
            "p99_seconds": framework.summary(found.p99s),
            "per_window": found.per_window,
            "whole_run": stats(found.all_ours),
            "bar": f"p99 < {BAR_P99_SEC}",
            "met": found.p99 < BAR_P99_SEC,
        },
        "baseline": {
            "what": kind.baseline,
            "label": kind.label,
            "per_window": found.loop_windows,
            "whole_run": stats(all_theirs) if all_theirs else None,
        },
        "ratio_subject_p99_to_baseline_p99": {
            "median_of_windows": round(found.ratio, 2),
            "what": "each window's p99 over the bare loop's p99 in the same window",
        },
        "batches": batch_figures(seen.events),
        "job_split_seconds_median": {
            "what": "the job's own per-batch log line (job.micro_batch), measured batches",
            **seen.split,
        },
        "table_watcher": {
            "polls": seen.polls,
            "mean_poll_seconds": round(seen.poll_seconds / max(1, seen.polls), 4),
        },
        "endpoint": dict(kind.facts(plan.job_endpoint)),
    }


def _achieved(plan: Plan, seen: Observed) -> float:
    """The rate the producer reached (it shares the machine with the job)."""
    return len(plan.measured) / seen.production_seconds


def _chart(ctx: Context, kind: Kind, found: Windows) -> None:
    """Medians against the bare loop's, and the distribution of every latency."""
    loop_windows = found.loop_windows
    with framework.figure(ctx, kind.name, ncols=2) as (_, axes):
        framework.bars(
            axes[0],
            [f"{kind.label} p50", f"{kind.label} p99", "table p50", "table p99"],
            [
                float(statistics.median(w["p50_seconds"] for w in loop_windows))
                if loop_windows
                else 0.0,
                found.loop_p99 if found.paired else 0.0,
                found.p50,
                found.p99,
            ],
            f"put -> visible, {RATE:,} records/s, {TRIGGER_SEC} s trigger",
            "seconds",
        )
        ax = axes[1]
        for values, label in ((found.all_ours, "table (ours)"), (found.all_theirs, kind.label)):
            if values:
                ordered = sorted(values)
                shares = [i / len(ordered) for i in range(1, len(ordered) + 1)]
                ax.plot(ordered, shares, label=label)
        ax.axvline(BAR_P99_SEC, color="#c44e52", linestyle="--", label=f"bar p99 {BAR_P99_SEC} s")
        ax.set_xlabel("seconds from put")
        ax.set_ylabel("share of records")
        ax.set_title("latency distribution", fontsize=10)
        ax.legend(fontsize=8)
