"""Scale: records/s by batch size, peak memory at the largest, synth time by instance count.

1. Batch size. ``BatchProcessor.process_batch(prepared)``, as the throughput
   benchmark runs it (``prepare`` built once per size, as the job builds it
   once on its stream), on 10,000, 100,000 and 1,000,000 records
   (quick: 500, 1,000 and 2,000) of the job's mix (2 % malformed, 5 %
   re-sent ids), one Parquet file each; every repeat runs each size once, so
   all sizes see the same machine load. Cost per record = seconds / records.
   Bar: the cost per record at each size is at most 1.2x the cost at the size
   below (it must not grow; 20 % is the run-to-run spread of this shared
   machine, e.g. bench/results/throughput.json).
2. Memory. While the largest batch runs, resident set sizes are sampled every
   0.2 s (psutil): the JVM (in local mode the driver and its executor are one
   process), the Python workers (the JVM's Python children: ``pyspark.daemon``
   and its forks; RSS counts their shared pages once per process) and this
   driver Python process. Reported, no bar.
3. Synth. The CDK app with a generated context (cdk.json's defaults plus N
   instances ``scale<i>``/``eu-west-1``, the example's synth-check flag, cdk-nag
   on), built and synthesized in a fresh Python process per synth
   (:mod:`bench.synth_child`): what ``cdk synth`` runs (``python3 app.py``),
   without the CLI. 1, 3 and 6 instances (quick: 1 and 2). Bars (medians):
   6 instances in under 60 s, and no worse than linear: t(6) / t(1) <= 6.
   Reported with it: a least-squares line through every run,
   t = fixed + per_instance x n, which says what one more instance costs.
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import psutil  # type: ignore[import-untyped]

from bench import framework, stream, synth_child
from bench.framework import Context
from job.micro_batch import BatchProcessor, prepare

NAME: Final = "scale"


@dataclass(frozen=True)
class Settings:
    """What is measured: the batch sizes (records) and the instance counts synthesized."""

    batch_sizes: tuple[int, ...]
    instance_counts: tuple[int, ...]


FULL: Final = Settings(batch_sizes=(10_000, 100_000, 1_000_000), instance_counts=(1, 3, 6))
# --quick (the smoke test): smaller batches, fewer instances, one repeat
# (Context.timed_rounds).
QUICK: Final = Settings(batch_sizes=(500, 1_000, 2_000), instance_counts=(1, 2))
PER_RECORD_BAR: Final = 1.2
SYNTH_BAR_SEC: Final = 60.0
SAMPLE_SEC: Final = 0.2


# --- synth ----------------------------------------------------------------------------------


def synth_once(instances: int, outdir: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds of one synth in a fresh process, and the child's own split."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", synth_child.COMMAND, str(instances), str(outdir)],
        cwd=str(synth_child.REPO),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"synth of {instances} instances failed:\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout.strip().splitlines()[-1])


def line_fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares ``(intercept, slope)`` of ``t = intercept + slope x n``."""
    n_mean = statistics.fmean(n for n, _ in points)
    t_mean = statistics.fmean(t for _, t in points)
    spread = sum((n - n_mean) ** 2 for n, _ in points)
    if spread == 0:
        return t_mean, 0.0
    slope = sum((n - n_mean) * (t - t_mean) for n, t in points) / spread
    return t_mean - slope * n_mean, slope


# --- memory ---------------------------------------------------------------------------------


@dataclass
class PeakMemory:
    """Peak RSS (bytes) of the JVM, its Python workers and this process."""

    jvm: int = 0
    workers_total: int = 0
    worker_max: int = 0
    workers_most: int = 0
    driver_python: int = 0
    samples: int = 0
    jvm_heap_option: str = ""
    errors: list[str] = field(default_factory=list)

    def sample(self) -> None:
        me = psutil.Process()
        self.driver_python = max(self.driver_python, me.memory_info().rss)
        jvm_rss = 0
        workers: list[int] = []
        for child in me.children(recursive=True):
            try:
                if child.name() != "java":
                    continue
                jvm_rss += child.memory_info().rss
                if not self.jvm_heap_option:
                    self.jvm_heap_option = " ".join(
                        a for a in child.cmdline() if a.startswith(("-Xmx", "-Xms"))
                    )
                for worker in child.children(recursive=True):
                    if worker.name().startswith("python"):
                        workers.append(worker.memory_info().rss)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue  # a worker that ended between listing and reading
        self.jvm = max(self.jvm, jvm_rss)
        self.workers_total = max(self.workers_total, sum(workers))
        self.worker_max = max([self.worker_max, *workers])
        self.workers_most = max(self.workers_most, len(workers))
        self.samples += 1

    def to_dict(self) -> dict[str, Any]:
        mib = 2**20
        return {
            "jvm_driver_and_executor_mib": round(self.jvm / mib, 1),
            "python_workers_total_mib": round(self.workers_total / mib, 1),
            "python_worker_largest_mib": round(self.worker_max / mib, 1),
            "python_workers_at_most": self.workers_most,
            "driver_python_process_mib": round(self.driver_python / mib, 1),
            "jvm_heap_option": self.jvm_heap_option or "(Spark's default)",
            "samples": self.samples,
        }


class Sampler(threading.Thread):
    """Samples ``peak`` every 0.2 s until stopped."""

    def __init__(self, peak: PeakMemory) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.peak = peak
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.peak.sample()
            except Exception as exc:  # a sampling failure must not kill the benchmark
                self.peak.errors.append(repr(exc))
            self.stop.wait(SAMPLE_SEC)

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self.join(10)


# --- the benchmark --------------------------------------------------------------------------


def run(ctx: Context) -> None:
    spark = stream.micro_batch_session(ctx.spark)  # as a streaming query runs its batches
    measured = QUICK if ctx.quick else FULL
    repeats = ctx.timed_rounds
    times: dict[int, list[float]] = {n: [] for n in measured.batch_sizes}
    largest = max(times)
    work = ctx.scratch(NAME)
    start = stream.now()
    sources: dict[int, Path] = {}
    for n in times:
        sources[n] = work / f"source-{n}"
        stream.write_batch_files(sources[n], stream.mixed_records(n, f"sc{n}"), start)
    config = stream.job_config(ctx, NAME)
    processor = BatchProcessor(config, stream.kafka_settings(config), query_id="bench-scale")
    _ = processor.table  # created before the clock starts, as at the job's start
    load_before = framework.machine_load()

    prepared = {n: prepare(spark.read.parquet(str(sources[n])), config) for n in times}
    batch_ids = iter(range(1, 1_000_000))

    def batch(n: int) -> None:
        processor.process_batch(prepared[n], next(batch_ids))

    batch(min(times))  # warm-up (JIT, Python workers, broker, catalog), not timed
    peak = PeakMemory()
    for _ in range(repeats):
        for n, runs in times.items():
            if n == largest:
                with Sampler(peak):
                    runs.append(framework.timed(lambda n=n: batch(n)))  # type: ignore[misc]
            else:
                runs.append(framework.timed(lambda n=n: batch(n)))  # type: ignore[misc]
    load_mid = framework.machine_load()

    instance_counts = measured.instance_counts
    synth: dict[int, list[float]] = {n: [] for n in instance_counts}
    synth_split: dict[int, list[dict[str, Any]]] = {n: [] for n in instance_counts}
    for rep in range(repeats):
        for n in instance_counts:
            seconds, split = synth_once(n, ctx.scratch(f"cdk-{n}-{rep}"))
            synth[n].append(seconds)
            synth_split[n].append(split)

    med = statistics.median
    per_record = {n: med(t) / n for n, t in times.items()}
    sizes = sorted(times)
    growth = [per_record[b] / per_record[a] for a, b in itertools.pairwise(sizes)]
    per_record_met = all(g <= PER_RECORD_BAR for g in growth)
    counts = sorted(synth)
    fewest, most = counts[0], counts[-1]
    synth_most = med(synth[most])
    synth_met = synth_most < SYNTH_BAR_SEC
    growth_ratio = synth_most / med(synth[fewest])
    linear_met = growth_ratio <= most / fewest
    fixed, per_instance = line_fit([(n, t) for n in counts for t in synth[n]])
    framework.write_result(
        ctx,
        NAME,
        {
            "what": __doc__,
            "repeats": repeats,
            "batches": {
                str(n): {
                    "records": n,
                    "seconds": framework.summary(times[n]),
                    "records_per_second": round(n / med(times[n]), 1),
                    "microseconds_per_record": round(per_record[n] * 1e6, 2),
                }
                for n in sizes
            },
            "per_record_cost_growth": {
                f"{b:,} vs {a:,}": round(g, 3)
                for (a, b), g in zip(itertools.pairwise(sizes), growth, strict=True)
            },
            "per_record_bar": f"each <= {PER_RECORD_BAR}",
            "per_record_met": per_record_met,
            "peak_memory_at_largest": {"records": largest, **peak.to_dict()},
            "peak_memory_errors": peak.errors[:5],
            "synth": {
                str(n): {
                    "instances": n,
                    "seconds": framework.summary(synth[n]),
                    "child_split_first_run": synth_split[n][0],
                }
                for n in counts
            },
            "synth_growth_ratio": round(growth_ratio, 3),
            "synth_fit_seconds": {
                "fixed": round(fixed, 2),
                "per_instance": round(per_instance, 2),
                "what": "least-squares line through every synth run",
            },
            "synth_bars": {
                f"{most} instances median": f"< {SYNTH_BAR_SEC:g} s",
                f"t({most}) / t({fewest})": f"<= {most / fewest:g} (linear)",
            },
            "synth_met": synth_met,
            "synth_linear_met": linear_met,
            "code": framework.code_version(),
            "load_before": load_before,
            "load_after_batches": load_mid,
            "load_after": framework.machine_load(),
        },
    )
    with framework.figure(ctx, NAME, ncols=3, width=4.5) as (_, axes):
        framework.bars(
            axes[0],
            [f"{n:,}" for n in sizes],
            [n / med(times[n]) for n in sizes],
            "records/s by batch size (median)",
            "records/s",
        )
        mem = peak.to_dict()
        framework.bars(
            axes[1],
            ["JVM", "Python workers", "largest worker", "driver Python"],
            [
                mem["jvm_driver_and_executor_mib"],
                mem["python_workers_total_mib"],
                mem["python_worker_largest_mib"],
                mem["driver_python_process_mib"],
            ],
            f"peak RSS, {largest:,}-record batch",
            "MiB",
        )
        framework.bars(
            axes[2],
            [f"{n} instance{'s' if n > 1 else ''}" for n in counts],
            [med(synth[n]) for n in counts],
            "cdk synth (fresh process, median)",
            "seconds",
        )
    mem = peak.to_dict()
