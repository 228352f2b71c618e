"""Latency: from a record's put to its row being readable in the table.

A producer (a process of its own) puts the job's record mix (2 % malformed,
5 % re-sent ids) on a 2-shard Kinesis stream (moto) at a steady 1,000
records/s: one ``PutRecords`` of 100 records every 0.1 s, through the
producer's own ``put_all``. The job's
streaming query runs in this process exactly as ``job.driver`` builds it:
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
windows of 60 s (quick: one of 10 s), and each window's p50/p99 is a repeat.

Baseline, in the same run on the same stream: a bare consumer, one boto3
GetRecords loop over both shards from ``LATEST`` polling every 0.2 s (Kinesis
allows 5 GetRecords calls per second per shard), which decodes each record's
id: put -> seen by the simplest reader. ratio = our p99 / the loop's p99 in
the same window (median of the windows): how much the micro-batch adds over
reading the stream. Bar (issue 11): p99 < 5 s (median of the windows). The
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
import logging
import re
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from bench import framework
from bench.framework import Context, Row
from bench.read_loops import Loop, Seen, poll_loops, raise_failed, seen_by
from bench.stream import job_config, kafka_settings, progress_events
from local.summary import percentile as nearest_rank
from model.polling import poll_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from model.config import JobConfig
    from ops.events import SampleRecord

NAME: Final = "latency"
BAR_P99_SEC: Final = 5.0
STREAM: Final = "bench-latency"
SHARDS: Final = 2
RATE: Final = 1_000  # records per second
PUTS_PER_SECOND: Final = 10
TRIGGER_SEC: Final = 1
TABLE_POLL_SEC: Final = 0.2
WARM_UP_RECORDS: Final = 200
DRAIN_TIMEOUT_SEC: Final = 300.0
# A backlog drains at 100 records/s at least, or the run fails.
DRAIN_RECORDS_PER_SEC: Final = 100


@contextlib.contextmanager
def own_moto() -> Iterator[str]:
    """A moto server for this benchmark (its URL), stopped at the end."""
    from local.emulators import LOOPBACK, start_moto

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


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100, :func:`local.summary.percentile`,
    the rank the run summary uses) of a sample that must not be empty."""
    found = nearest_rank(values, q)
    if found is None:
        raise ValueError("percentile of no values")
    return found


class TableWatcher(threading.Thread):
    """Polls the table through its catalog, as a reader would: the first time
    each batch's snapshot is visible, and the table's row count."""

    def __init__(self, config: JobConfig) -> None:
        super().__init__(name="table-watcher", daemon=True)
        from job.table.catalog import load_table

        self.table = load_table(config)
        self.batches = Seen()
        self.rows = 0
        self.polls = 0
        self.poll_seconds = 0.0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def poll(self) -> None:
        from model.table_layout import BATCH_ID_SUMMARY

        started = time.monotonic()
        self.table.refresh()
        now = time.monotonic()
        for snap in self.table.snapshots():
            batch = snap.summary.get(BATCH_ID_SUMMARY) if snap.summary is not None else None
            if batch is not None:
                self.batches.first(str(batch), now)
        current = self.table.current_snapshot()
        if current is not None and current.summary is not None:
            self.rows = int(current.summary.get("total-records") or 0)
        self.polls += 1
        self.poll_seconds += time.monotonic() - started

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.poll()
                self.stop.wait(TABLE_POLL_SEC)
        except BaseException as exc:  # reported by the benchmark, not lost in a thread
            self.error = exc


class JobSplit(logging.Handler):
    """The job's own split of each batch, from its per-batch log line
    (``job.micro_batch``: ``batch %d: ... %.2fs (pass %.2fs, commit %.2fs)``);
    a line of another shape is ignored, so a reworded log costs a figure, not
    the benchmark."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds: dict[int, dict[str, float]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        text, args = str(record.msg), record.args
        if not text.startswith("batch %d:") or not isinstance(args, tuple) or len(args) < 4:
            return
        names = re.findall(r"(\w+) %\.2fs", text.rsplit(";", 1)[-1])
        values = args[-len(names) - 1 :] if names else ()
        if len(names) + 1 != len(values):
            return
        try:
            figures = {"total": float(str(values[0]))}
            figures.update({n: float(str(v)) for n, v in zip(names, values[1:], strict=True)})
            self.seconds[int(str(args[0]))] = figures
        except ValueError:
            return

    @contextlib.contextmanager
    def attached(self) -> Iterator[JobSplit]:
        from job import micro_batch

        logger = logging.getLogger(micro_batch.__name__)
        level = logger.level
        logger.setLevel(logging.INFO)
        logger.addHandler(self)
        try:
            yield self
        finally:
            logger.removeHandler(self)
            logger.setLevel(level)


def produce(
    client: Any, records: Sequence[SampleRecord], rate: int, puts: dict[str, float]
) -> float:
    """Put ``records`` at ``rate`` per second in calls of rate/10 records on a
    fixed schedule (a late call is followed at once by the next, until the
    schedule is met again); ``puts`` gets each valid id's first put time
    (``time.monotonic``: one clock for every process of the machine).
    Returns the seconds taken."""
    from ops.stream_writer import put_all

    per_call = max(1, rate // PUTS_PER_SECOND)
    started = time.monotonic()
    for index in range(0, len(records), per_call):
        due = started + index / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        chunk = records[index : index + per_call]
        issued = time.monotonic()
        put_all(client, STREAM, chunk)
        for record in chunk:
            if record.event_id is not None and not record.is_failure:
                puts.setdefault(record.event_id, issued)
    return time.monotonic() - started


def _produce_child(endpoint: str, records: Sequence[SampleRecord], rate: int, out: Any) -> None:
    """A producer process: its own interpreter, so the driver's threads (py4j
    callbacks, the table watcher, the bare loop) never hold it back."""
    from ops.stream_writer import kinesis_client

    puts: dict[str, float] = {}
    started = time.monotonic()
    seconds = produce(kinesis_client(framework.REGION, endpoint), records, rate, puts)
    out.send((started, seconds, puts))
    out.close()


def produce_elsewhere(
    endpoint: str, records: Sequence[SampleRecord], rate: int
) -> tuple[float, float, dict[str, float]]:
    """:func:`produce` in a child process: (started, seconds, put times)."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    receive, send = spawn.Pipe(duplex=False)
    child = spawn.Process(target=_produce_child, args=(endpoint, records, rate, send))
    child.start()
    send.close()
    limit = len(records) / rate * 4 + 120
    try:
        if not receive.poll(limit):
            raise TimeoutError(f"producer did not finish {len(records)} records in {limit:.0f}s")
        started, seconds, puts = receive.recv()
    finally:
        child.join(30)
        if child.is_alive():
            child.terminate()
    return float(started), float(seconds), dict(puts)


def start_job_query(spark: SparkSession, config: JobConfig) -> StreamingQuery:
    """The job's query as ``job.driver.run`` builds it (no lease, no metrics)."""
    from job.micro_batch import BatchProcessor, prepare
    from job.sources import read_stream
    from job.table.catalog import ensure_table

    processor = BatchProcessor(config, kafka_settings(config), table=ensure_table(config))
    return (
        prepare(read_stream(spark, config), config)
        .writeStream.option("checkpointLocation", config.checkpoint_location)
        .trigger(processingTime=f"{config.trigger_interval_sec} seconds")
        .foreachBatch(processor)
        .start()
    )


def wait_rows(query: StreamingQuery, watcher: TableWatcher, rows: int, timeout: float) -> None:
    """Until the table holds ``rows`` rows; a failed query or watcher ends the wait."""

    def landed() -> bool:
        failure = query.exception()
        if failure is not None:
            raise RuntimeError(f"query failed: {failure}")
        if watcher.error is not None:
            raise RuntimeError(f"table watcher failed: {watcher.error}")
        return watcher.rows >= rows

    poll_until(
        landed,
        timeout=timeout,
        interval=0.2,
        on_timeout=lambda: TimeoutError(
            f"{watcher.rows} of {rows} rows in the table after {timeout:.0f}s"
        ),
    )


def _stats(latencies: Sequence[float]) -> dict[str, Any]:
    return {
        "records": len(latencies),
        "p50_seconds": round(percentile(latencies, 50), 3),
        "p99_seconds": round(percentile(latencies, 99), 3),
        "max_seconds": round(max(latencies), 3),
    }


def _batch_figures(events: list[dict[str, Any]]) -> dict[str, Any]:
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


def run(ctx: Context) -> list[Row]:
    return measure(ctx, POLLING)


def measure(ctx: Context, kind: Kind) -> list[Row]:
    """The benchmark for one kind of reading (``bench.latency_efo`` runs EFO)."""
    windows, window_sec = (1, 10) if ctx.quick else (ctx.repeats, 60)
    with kind.servers() as (endpoint, job_endpoint):
        return _run(ctx, kind, endpoint, job_endpoint, windows=windows, window_sec=window_sec)


def _run(
    ctx: Context, kind: Kind, endpoint: str, job_endpoint: str, *, windows: int, window_sec: int
) -> list[Row]:
    from ops.events import MixSpec, expected_ids, generate, now_utc
    from ops.stream_writer import ensure_stream, kinesis_client

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
    spark = ctx.spark
    load_before = framework.machine_load()
    split = JobSplit()
    with split.attached():
        query = start_job_query(spark, config)
        watcher = TableWatcher(config)
        watcher.start()
        baseline = contextlib.ExitStack()
        loops: Sequence[Loop] = ()
        puts: dict[str, float] = {}
        try:
            warm_started = time.monotonic()
            produce(client, warm, RATE, {})
            wait_rows(query, watcher, len(expected_ids(warm)), DRAIN_TIMEOUT_SEC)
            warm_up_seconds = time.monotonic() - warm_started
            warm_batches = max((int(e["batchId"]) for e in progress_events(query)), default=-1)
            loops = baseline.enter_context(kind.loops(client, job_endpoint, STREAM))
            produced_started, production_seconds, puts = produce_elsewhere(endpoint, measured, RATE)
            total = len(expected_ids(warm)) + len(expected_ids(measured))
            wait_rows(query, watcher, total, DRAIN_TIMEOUT_SEC + total / DRAIN_RECORDS_PER_SEC)
            watcher.poll()
            events = [e for e in progress_events(query) if int(e["batchId"]) > warm_batches]
        finally:
            watcher.stop.set()
            baseline.close()
            query.stop()
    watcher.join(10)
    raise_failed(loops)
    load_after = framework.machine_load()

    rows = watcher.table.scan(selected_fields=("id", "batch_id")).to_arrow().to_pylist()
    batch_seen = watcher.batches.snapshot()
    readable = {str(r["id"]): batch_seen[str(r["batch_id"])] for r in rows}
    seen_by_loop = seen_by(loops)
    ours: list[list[float]] = [[] for _ in range(windows)]
    theirs: list[list[float]] = [[] for _ in range(windows)]
    missing = 0
    for event_id, put in puts.items():
        window = min(windows - 1, int((put - produced_started) // window_sec))
        if event_id not in readable:
            missing += 1
            continue
        ours[window].append(readable[event_id] - put)
        if event_id in seen_by_loop:
            theirs[window].append(seen_by_loop[event_id] - put)
    if missing:
        raise RuntimeError(f"{missing} produced ids never became readable in the table")
    per_window = [_stats(w) for w in ours]
    loop_windows = [_stats(w) for w in theirs if w]
    all_ours = [x for w in ours for x in w]
    all_theirs = [x for w in theirs for x in w]
    p99s = [w["p99_seconds"] for w in per_window]
    p50s = [w["p50_seconds"] for w in per_window]
    p99 = float(statistics.median(p99s))
    p50 = float(statistics.median(p50s))
    # Each window's p99 against the loop's in the same window (same load).
    paired = [(o, t) for o, t in zip(ours, theirs, strict=True) if o and t]
    loop_p99 = (
        float(statistics.median(percentile(t, 99) for _, t in paired)) if paired else float("nan")
    )
    ratio = (
        float(statistics.median(percentile(o, 99) / percentile(t, 99) for o, t in paired))
        if paired
        else float("nan")
    )
    achieved = len(measured) / production_seconds
    batches = _batch_figures(events)
    measured_batches = [b for b in split.seconds if b > warm_batches]
    job_split = {
        name: round(statistics.median(split.seconds[b].get(name, 0.0) for b in measured_batches), 3)
        for name in sorted({n for b in measured_batches for n in split.seconds[b]})
    }
    framework.write_result(
        ctx,
        kind.name,
        {
            "what": kind.what,
            "source": dict(kind.source),
            "repeats": windows,
            "rate_records_per_second": RATE,
            "achieved_rate_records_per_second": round(achieved, 1),
            "window_seconds": window_sec,
            "windows": windows,
            "shards": SHARDS,
            "trigger_interval_sec": TRIGGER_SEC,
            "table_poll_interval_sec": TABLE_POLL_SEC,
            "records_put": len(measured),
            "ids_measured": len(all_ours),
            "warm_up": {"records": WARM_UP_RECORDS, "seconds": round(warm_up_seconds, 1)},
            "subject": {
                "what": "put -> row readable in the table (job's query, 1 s trigger)",
                "p50_seconds": framework.summary(p50s),
                "p99_seconds": framework.summary(p99s),
                "per_window": per_window,
                "whole_run": _stats(all_ours),
                "bar": f"p99 < {BAR_P99_SEC}",
                "met": p99 < BAR_P99_SEC,
            },
            "baseline": {
                "what": kind.baseline,
                "label": kind.label,
                "per_window": loop_windows,
                "whole_run": _stats(all_theirs) if all_theirs else None,
            },
            "ratio_subject_p99_to_baseline_p99": {
                "median_of_windows": round(ratio, 2),
                "what": "each window's p99 over the bare loop's p99 in the same window",
            },
            "batches": batches,
            "job_split_seconds_median": {
                "what": "the job's own per-batch log line (job.micro_batch), measured batches",
                **job_split,
            },
            "table_watcher": {
                "polls": watcher.polls,
                "mean_poll_seconds": round(watcher.poll_seconds / max(1, watcher.polls), 4),
            },
            "endpoint": dict(kind.facts(job_endpoint)),
            "code": framework.code_version(),
            "load_before": load_before,
            "load_after": load_after,
        },
    )
    with framework.figure(ctx, kind.name, ncols=2) as (_, axes):
        framework.bars(
            axes[0],
            [f"{kind.label} p50", f"{kind.label} p99", "table p50", "table p99"],
            [
                float(statistics.median(w["p50_seconds"] for w in loop_windows))
                if loop_windows
                else 0.0,
                loop_p99 if paired else 0.0,
                p50,
                p99,
            ],
            f"put -> visible, {RATE:,} records/s, {TRIGGER_SEC} s trigger",
            "seconds",
        )
        ax = axes[1]
        ordered = sorted(all_ours)
        ax.plot(
            ordered, [i / len(ordered) for i in range(1, len(ordered) + 1)], label="table (ours)"
        )
        if all_theirs:
            loop_sorted = sorted(all_theirs)
            ax.plot(
                loop_sorted,
                [i / len(loop_sorted) for i in range(1, len(loop_sorted) + 1)],
                label=kind.label,
            )
        ax.axvline(BAR_P99_SEC, color="#c44e52", linestyle="--", label=f"bar p99 {BAR_P99_SEC} s")
        ax.set_xlabel("seconds from put")
        ax.set_ylabel("share of records")
        ax.set_title("latency distribution", fontsize=10)
        ax.legend(fontsize=8)
    trigger = batches.get("trigger_execution_seconds", {}).get("median", float("nan"))
    return [
        Row(
            kind.name,
            f"put -> readable p99 ({windows} x {window_sec}s, {achieved:,.0f} of {RATE:,}/s put)",
            f"{p99:.2f}s (p50 {p50:.2f}s; {kind.label} p99 {loop_p99:.2f}s, {ratio:.1f}x)",
            f"< {BAR_P99_SEC:g}s",
            p99 < BAR_P99_SEC,
        ),
        Row(
            kind.name,
            "batches (median)",
            f"{batches.get('batches', 0)} batches, "
            f"{batches.get('input_rows_per_batch_median', 0):,.0f} rows, {trigger:.2f}s each"
            + (
                " (" + ", ".join(f"{k} {v:.2f}s" for k, v in job_split.items()) + " in the job)"
                if job_split
                else ""
            ),
        ),
    ]
