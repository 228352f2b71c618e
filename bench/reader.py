"""Reader: what one executor core of ``python-kinesis`` reads, and whether two read more.

The same backlog (8 shards, 200,000 records of ~750 bytes; quick:
1,000: ``FULL`` and ``QUICK``) is drained by the current reader twice per
round, in alternating order, with ``kinesis.python.readTasks`` 1 (every shard
in one executor task: one executor core reads) and 2 (two tasks in parallel,
two cores). docs/sizing.md sizes the read cores from these figures.

The session is ``local[2]`` (the project's Spark conf): two task slots. With
one read task the second slot has nothing to run (source -> ``noop`` sink is
one stage), so 1 vs 2 read tasks is 1 vs 2 executor cores reading; one
session serves both, so they share one JVM, equally warm, in the same run.

Each drain is a new query on a new checkpoint: it first reads a warm-up
(``WARM_UP`` records per shard, which starts the query's Python processes),
then the server releases the backlog and the clock runs until
``processAllAvailable`` returns (every record read). The backlog fits one
batch (``kinesis.maxFetchRecordsPerShard`` 100,000, as one raises it for a
catch-up, docs/sizing.md), so the drain times the reading, not Spark's
per-batch work. Figures per drain:

* records/s: backlog / wall time from the release;
* executor CPU: user + system CPU seconds of Spark's Python workers (the read
  tasks) over the drain: records per such second is what one executor core
  reads, and CPU seconds per wall second the cores they got. On a shared
  machine these hold where the wall-clock ratio cannot: when other work
  holds the second core, two tasks get no more CPU than one;
* JVM CPU per wall second (the driver JVM holds the executors' threads in
  ``local`` mode: the Arrow hand-off and the sink), for the record;
* driver CPU: user + system CPU seconds, over the drain, of the process that
  runs the source's driver side (Spark's Python streaming source runner,
  ``pyspark.sql.streaming.python_streaming_source_runner``), per 100,000
  records: the driver plans and reads nothing, so a driver sized for the
  rest of the job carries any rate. (The JVM's CPU is not in it: in ``local``
  mode the executors are threads of the driver JVM.)

Bar: 2 tasks >= 1.6x the records/s of 1 task (the reader scales with the
cores it is given).

The records come from ``bench.kinesis_http``, a loopback stand-in for
GetRecords in a process of its own (moto answers slower than one reader
core). Its own rate, plain HTTP clients paging through the same backlog with
no decode, is measured in the same run and must be well above the fastest
reader's.

``--quick`` (the smoke test): 1,000 records, one round, no warm-up round; its
figures only show the benchmark runs.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import psutil  # type: ignore[import-untyped]

from bench import framework, stream
from bench.framework import Context, bars, figure, machine_load, summary, write_result
from bench.kinesis_http import Layout, raw_rate, serve_in_process, set_visible
from job.sources.kinesis_python import FORMAT_NAME, register

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAME: Final = "reader"


@dataclass(frozen=True)
class Settings:
    """The backlog and the rounds that drain it."""

    shards: int
    records: int  # the whole backlog, spread evenly over the shards
    warmup_rounds: int  # untimed rounds of both readers before the timed ones


FULL: Final = Settings(shards=8, records=200_000, warmup_rounds=1)
# --quick (the smoke test): a small backlog, no warm-up, one timed round
# (Context.timed_rounds).
QUICK: Final = replace(FULL, records=1_000, warmup_rounds=0)
# Records per shard the query reads first, unmeasured: it starts its Python processes.
WARM_UP: Final = 4
# The backlog in one batch, as after raising the bound for a catch-up
# (docs/sizing.md): the drain then measures reading, not Spark's per-batch work.
FETCH_PER_SHARD: Final = 100_000
SCALE_BAR: Final = 1.6
RUNNER: Final = "python_streaming_source_runner"
WORKERS: Final = "pyspark.daemon"
JVM: Final = "org.apache.spark.deploy.SparkSubmit"
STREAM: Final = "bench-reader"


@dataclass(frozen=True)
class Reader:
    """One of the readers a drain runs: its label in the results and its
    ``kinesis.python.readTasks``."""

    label: str
    read_tasks: int


ONE: Final = Reader("1 read task", read_tasks=1)
TWO: Final = Reader("2 read tasks", read_tasks=2)


@dataclass(frozen=True)
class Drain:
    records: int
    seconds: float
    driver_cpu_sec: float
    worker_cpu_sec: float
    jvm_cpu_sec: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def cpu_per_100k(self) -> float:
        return self.driver_cpu_sec * 100_000 / self.records

    @property
    def per_worker_core(self) -> float:
        """Records per CPU second of the executors' Python workers: what one
        executor core reads, whatever else the machine runs."""
        return self.records / self.worker_cpu_sec if self.worker_cpu_sec else 0.0

    @property
    def jvm_cores(self) -> float:
        """The JVM's CPU seconds per wall second (driver and, in local mode,
        the executors' threads: the Arrow hand-off, the sink)."""
        return self.jvm_cpu_sec / self.seconds

    @property
    def worker_cores(self) -> float:
        """The workers' CPU seconds per wall second: the cores they got."""
        return self.worker_cpu_sec / self.seconds


def _cpu_of(marker: str) -> dict[int, float]:
    """CPU seconds so far of each process under this one whose command line
    holds ``marker``."""
    found: dict[int, float] = {}
    for process in psutil.Process().children(recursive=True):
        try:
            if any(marker in part for part in process.cmdline()):
                times = process.cpu_times()
                found[process.pid] = float(times.user + times.system)
        except psutil.Error:
            continue
    return found


def _runner_cpu() -> dict[int, float]:
    """The Python streaming source runner: the source's driver side."""
    return _cpu_of(RUNNER)


def _worker_cpu() -> dict[int, float]:
    """Spark's Python workers (forked by ``pyspark.daemon``): the read tasks."""
    return _cpu_of(WORKERS)


def _spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds spent between two samples (a process new since counts whole)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def _frame(spark: SparkSession, reader: Reader, endpoint: str, work: Path) -> Any:
    register(spark)
    return (
        spark.readStream.format(FORMAT_NAME)
        .option("kinesis.streamName", STREAM)
        .option("kinesis.region", framework.REGION)
        .option("kinesis.endpointUrl", endpoint)
        .option("kinesis.startingPosition", "TRIM_HORIZON")
        .option("kinesis.maxFetchTimePerShardSec", "60")
        .option("kinesis.maxFetchRecordsPerShard", str(FETCH_PER_SHARD))
        .option("kinesis.getRecords.fetchIntervalMs", "0")
        .option("kinesis.metadataPath", str(work / "kinesis_ends"))
        .option("kinesis.python.readTasks", str(reader.read_tasks))
        .load()
    )


def drain(spark: SparkSession, reader: Reader, endpoint: str, layout: Layout, work: Path) -> Drain:
    """One reader over the backlog: warm-up, release, wall time and runner CPU."""
    set_visible(endpoint, WARM_UP)
    query = stream.read_only_query(_frame(spark, reader, endpoint, work), work / "checkpoint")
    try:
        query.processAllAvailable()
        warm = stream.rows_read(query)
        before = _runner_cpu()
        if not before:
            raise RuntimeError(f"no {RUNNER} process found under this one")
        workers = _worker_cpu()
        jvm = _cpu_of(JVM)
        started = time.perf_counter()
        set_visible(endpoint, layout.records_per_shard)
        query.processAllAvailable()
        seconds = time.perf_counter() - started
        after = _runner_cpu()
        worker_cpu = _spent(workers, _worker_cpu())
        jvm_cpu = _spent(jvm, _cpu_of(JVM))
        read = stream.rows_read(query) - warm
    finally:
        query.stop()
    expected = layout.shards * (layout.records_per_shard - WARM_UP)
    if read != expected:
        raise RuntimeError(
            f"{reader.label}: read {read} records after the warm-up, expected {expected}"
        )
    cpu = sum(after.get(pid, cpu) - cpu for pid, cpu in before.items())
    return Drain(read, seconds, cpu, worker_cpu, jvm_cpu)


def run(ctx: Context) -> None:
    backlog = QUICK if ctx.quick else FULL
    layout = Layout(backlog.shards, backlog.records // backlog.shards)
    spark = ctx.spark
    order = (ONE, TWO)
    drains: dict[Reader, list[Drain]] = {reader: [] for reader in order}
    load_before = machine_load()
    with serve_in_process(layout, WARM_UP) as endpoint:
        set_visible(endpoint, layout.records_per_shard)
        served = [raw_rate(endpoint, layout, threads=2) for _ in range(1 if ctx.quick else 3)]
        warmups = backlog.warmup_rounds
        for repeat in range(warmups + ctx.timed_rounds):
            turn = order if repeat % 2 == 0 else tuple(reversed(order))
            for reader in turn:
                got = drain(spark, reader, endpoint, layout, ctx.scratch(f"{NAME}-{repeat}"))
                if repeat >= warmups:
                    drains[reader].append(got)
                print(
                    f"   {reader.label}: {got.rate:,.0f} records/s, driver CPU "
                    f"{got.cpu_per_100k:.3f} s/100k, workers {got.worker_cores:.2f} cores, "
                    f"JVM {got.jvm_cores:.2f} cores, "
                    f"{got.per_worker_core:,.0f} records/worker CPU s"
                    + ("" if repeat >= warmups else " (warm-up)"),
                    flush=True,
                )
    load_after = machine_load()

    def median(reader: Reader, figure_of: str) -> float:
        return float(statistics.median(getattr(d, figure_of) for d in drains[reader]))

    def summaries(figure_of: str, digits: int) -> dict[str, Any]:
        """Each reader's drains' ``figure_of`` summarized, by its label."""
        return {r.label: summary([getattr(d, figure_of) for d in drains[r]], digits) for r in order}

    scale = median(TWO, "rate") / median(ONE, "rate")
    fastest = max(median(reader, "rate") for reader in order)
    served_rate = float(statistics.median(served))
    result = {
        "what": (
            f"{layout.shards * layout.records_per_shard:,} records in {layout.shards} shards "
            "drained through a streaming query (noop sink) by the python-kinesis reader with "
            "1 and 2 read tasks, alternating, from a loopback GetRecords stand-in"
        ),
        "records_per_second": summaries("rate", 0),
        "executor_python_cores_used": summaries("worker_cores", 2),
        "jvm_cores_used": summaries("jvm_cores", 2),
        "records_per_executor_python_cpu_second": {
            "how": "records / CPU seconds of Spark's Python workers over the drain",
            **summaries("per_worker_core", 0),
        },
        "driver_cpu_seconds_per_100k_records": summaries("cpu_per_100k", 4),
        "two_tasks_over_one": {
            "value": round(scale, 3),
            "bar": f">= {SCALE_BAR}",
            "met": scale >= SCALE_BAR,
        },
        "server_records_per_second": {
            **summary(served, 0),
            "how": "2 plain HTTP clients paging through the backlog, no decode",
            "over_fastest_reader": round(served_rate / fastest, 1),
        },
        "load_before": load_before,
        "load_after": load_after,
    }
    write_result(ctx, NAME, result)
    labels = [reader.label for reader in order]
    charts = (
        ("rate", "drain rate (median)", "records/s"),
        ("per_worker_core", "records per executor Python CPU second", "records/s"),
    )
    with figure(ctx, NAME, ncols=len(charts)) as (_, axes):
        for axis, (figure_of, title, unit) in zip(axes, charts, strict=True):
            bars(axis, labels, [median(reader, figure_of) for reader in order], title, unit)
