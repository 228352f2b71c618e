"""serverless_sizing: what the EMR Serverless shape must hold, measured to size it.

The job runs as the serverless instance's job run runs (``orders-eu-west-1``,
:mod:`local.serverless_launch`: the StartJobRun request's spark-submit, the
application's spark-defaults, the dependency archive) with ONE task slot
(``spark.master`` ``local[1]``: the shape's one executor core), on the
emulators, at its own trigger interval. Three phases:

1. **10 records/s** and 2. **100 records/s** for a while each: the peak
   memory, as RSS and as PSS (sampled every 0.25 s over the job's process
   tree; the warm-up and the backlog are reported too) of
   the driver side (the JVM, the Python driver ``main.py`` and the Python
   processes the driver's JVM starts to plan the Python data source) and of
   the executor side (the Python workers of the tasks: ``pyspark.daemon``
   running ``pyspark.worker``), and the batch durations the job published.
3. **A backlog**: records put as fast as the emulator takes them, before the
   next trigger; the sustained records/s of one executor core is records /
   the summed durations of the batches that read them (the time spent
   waiting for the trigger is not the job's speed).

What local mode cannot separate: the driver and the executor share ONE JVM
here, so the JVM's peak is reported once; on the service the executor's JVM
holds the task side of it. Per-batch fixed cost: the median batch duration at
10 records/s (a batch of ~one trigger's records, where the per-record part is
small). The highest rate the trigger holds: batches of ``rate x trigger``
records must finish within the trigger, ``fixed + rate x trigger / sustained
<= trigger``, so ``rate <= (trigger - fixed) x sustained / trigger``.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import psutil  # type: ignore[import-untyped]

from bench.framework import Context, bars, code_version, figure, machine_load, write_result
from local import serverless_launch
from local.harness import LocalInstance, load_example_instances
from local.metrics import cloudwatch_client, read_published
from producer.events import MixSpec, generate, now_utc
from producer.local_run import JOB_CONFIG_FILE

NAME: Final = "serverless_sizing"
INSTANCE: Final = "orders-eu-west-1"
RATES: Final = (10, 100)
SAMPLE_EVERY_SEC: Final = 0.25
# The sampled process tree's parts.
JVM: Final = "jvm"
DRIVER_PYTHON: Final = "driver_python"
EXECUTOR_PYTHON: Final = "executor_python"
# The Python processes the driver's JVM starts for data source planning.
_DRIVER_SIDE_MODULES: Final = ("pyspark.sql.worker", "streaming_source_runner", "plan_data_source")


def classify(cmdline: list[str]) -> str | None:
    """Which part of the job a process of its tree is (None: not counted)."""
    text = " ".join(cmdline)
    if not cmdline:
        return None
    if os.path.basename(cmdline[0]).startswith("java"):
        return JVM
    if "python" not in os.path.basename(cmdline[0]):
        return None
    if any(part.endswith("main.py") for part in cmdline):
        return DRIVER_PYTHON
    if any(module in text for module in _DRIVER_SIDE_MODULES):
        return DRIVER_PYTHON
    return EXECUTOR_PYTHON


class TreeSampler(threading.Thread):
    """Peak summed memory (MiB) per part of a process tree, per phase, as RSS
    and as PSS. RSS counts a page once in every process that maps it, so the
    Python side's sum counts the interpreter and the libraries the forked
    ``pyspark.daemon`` workers share with their parent several times; PSS
    splits each shared page among its sharers, so its sum is what the tree
    holds, which is what a worker's memory limit charges."""

    def __init__(self, root_pid: int) -> None:
        super().__init__(daemon=True)
        self.root_pid = root_pid
        self.phase = "start"
        self.peaks: dict[str, dict[str, float]] = {}
        self.pss_peaks: dict[str, dict[str, float]] = {}
        self.samples = 0
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            try:
                root = psutil.Process(self.root_pid)
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                tree = []
            rss = {JVM: 0.0, DRIVER_PYTHON: 0.0, EXECUTOR_PYTHON: 0.0}
            pss = dict(rss)
            for process in tree:
                try:
                    part = classify(process.cmdline())
                    if part is not None:
                        memory = process.memory_full_info()
                        rss[part] += memory.rss / 2**20
                        pss[part] += memory.pss / 2**20
                except psutil.Error:
                    continue
            for totals, into in ((rss, self.peaks), (pss, self.pss_peaks)):
                peaks = into.setdefault(self.phase, {})
                for part, value in totals.items():
                    peaks[part] = max(peaks.get(part, 0.0), value)
            self.samples += 1
            self._done.wait(SAMPLE_EVERY_SEC)

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=10)


def fixed_and_rate(fixed_ms: float, sustained: float, trigger_sec: float) -> float:
    """The highest records/s whose batches finish within the trigger."""
    spare = trigger_sec - fixed_ms / 1000.0
    return max(0.0, spare * sustained / trigger_sec)


@contextmanager
def _job(ctx: Context, root: Path) -> Iterator[tuple[Any, TreeSampler]]:
    instance = {i.instance_id: i for i in load_example_instances()}[INSTANCE]
    local = LocalInstance.create(
        instance,
        root,
        ctx.emulators.endpoints,
        overrides={"source": {"max_fetch_records_per_shard": 10_000}},
    )
    job = serverless_launch.start(
        instance,
        local.config,
        root / JOB_CONFIG_FILE,
        local.log_path,
        {"spark.master": "local[1]", "spark.ui.enabled": "false"},
    )
    local.job, local.runs = job, local.runs + 1
    local.all_jobs.append(job)
    sampler = TreeSampler(job.pid)
    sampler.start()
    try:
        yield local, sampler
    finally:
        sampler.stop()
        if job.running:
            job.stop(timeout=120)
        job.close()


def _rounded(peaks: dict[str, float]) -> dict[str, float]:
    return {part: round(value, 1) for part, value in peaks.items()}


def _records(local: Any, count: int, prefix: str, seed: int) -> list[Any]:
    spec = MixSpec(
        count=count, malformed_share=0.0, duplicate_share=0.0, seed=seed, id_prefix=prefix,
        schema=local.schema,
    )  # fmt: skip
    return list(generate(spec, now_utc()))


def _durations(local: Any, start: datetime) -> list[float]:
    client = cloudwatch_client(local.config.region, local.endpoints.aws_url)
    return list(read_published(client, local.name, start, datetime.now(UTC)).batch_durations_ms)


def run(ctx: Context) -> None:
    seconds = 30 if ctx.quick else 90
    backlog = 2_000 if ctx.quick else 20_000
    load_before = machine_load()
    phases: dict[str, dict[str, Any]] = {}
    with _job(ctx, ctx.scratch(NAME)) as (local, sampler):
        trigger = float(local.config.trigger_interval_sec)
        # Warm-up: the job's start (JVM, table, first batches) is not a phase.
        sampler.phase = "warm-up"
        started = time.monotonic()
        local.produce(_records(local, 20, "warm", 1))
        local.wait_until_accounted(timeout=600)
        startup_sec = time.monotonic() - started
        for rate in RATES:
            sampler.phase = f"{rate}/s"
            begin = datetime.now(UTC)
            local.produce(_records(local, rate * seconds, f"r{rate}", rate), rate=float(rate))
            local.wait_until_accounted(timeout=600)
            durations = _durations(local, begin)
            phases[sampler.phase] = {
                "records": rate * seconds,
                "batch_ms": {
                    "median": round(statistics.median(durations), 1) if durations else None,
                    "max": round(max(durations), 1) if durations else None,
                    "count": len(durations),
                },
            }
        sampler.phase = "backlog"
        begin = datetime.now(UTC)
        put_at = time.monotonic()
        local.produce(_records(local, backlog, "backlog", 99))
        put_sec = time.monotonic() - put_at
        local.wait_until_accounted(timeout=1800, interval=0.5)
        drain_sec = time.monotonic() - put_at
        backlog_batches = _durations(local, begin)
        peaks, pss_peaks = sampler.peaks, sampler.pss_peaks
    load_after = machine_load()

    for phase, figures in phases.items():
        figures["peak_rss_mib"] = _rounded(peaks.get(phase, {}))
        figures["peak_pss_mib"] = _rounded(pss_peaks.get(phase, {}))
    fixed_ms = float(phases["10/s"]["batch_ms"]["median"] or 0.0)
    busy_sec = sum(backlog_batches) / 1000.0
    sustained = backlog / busy_sec if busy_sec > 0 else 0.0
    holds = fixed_and_rate(fixed_ms, sustained, trigger)
    result = {
        "instance": INSTANCE,
        "launch": "local/serverless_launch.py (StartJobRun spark-submit), spark.master local[1]",
        "trigger_interval_sec": trigger,
        "phase_seconds": seconds,
        "startup_to_first_rows_sec": round(startup_sec, 1),
        # The start (JVM, table, the first batches' planning) is no rate's phase,
        # but the worker must hold its peak too.
        "warm_up": {
            "peak_rss_mib": _rounded(peaks.get("warm-up", {})),
            "peak_pss_mib": _rounded(pss_peaks.get("warm-up", {})),
        },
        "phases": phases,
        "backlog": {
            "records": backlog,
            "put_sec": round(put_sec, 1),
            "drain_sec": round(drain_sec, 1),
            "batch_ms": [round(d, 1) for d in backlog_batches],
            "peak_rss_mib": _rounded(peaks.get("backlog", {})),
            "peak_pss_mib": _rounded(pss_peaks.get("backlog", {})),
        },
        "per_batch_fixed_cost_ms": fixed_ms,
        "sustained_records_per_sec_one_core": round(sustained, 1),
        "highest_rate_holding_trigger_records_per_sec": round(holds, 1),
        "samples": sampler.samples,
        "what": __doc__,
        "load_before": load_before,
        "load_after": load_after,
        "code": code_version(),
    }
    write_result(ctx, NAME, result)
    labels = [f"{p} {part}" for p in ("10/s", "100/s") for part in (JVM, DRIVER_PYTHON)]
    labels += [f"{p} {EXECUTOR_PYTHON}" for p in ("10/s", "100/s")]
    values = [peaks.get(label.split()[0], {}).get(label.split()[1], 0.0) for label in labels]
    with figure(ctx, NAME) as (_fig, axes):
        bars(axes[0], labels, values, "serverless shape: peak RSS by part (MiB)", "MiB")
