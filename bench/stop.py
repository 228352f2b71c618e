"""Graceful stop under load: seconds from the stop marker to the job's exit.

The job's own ``job.query.run`` (its gate, its marker check, its main loop;
metrics off) runs on a moto stream of 2 shards that a child producer
(the job's record mix, ``producer.events``, new ids every second) fills at 1,000 records/s
for the whole benchmark, on a 1 s trigger. Each of the stops waits until the
(re)started query has run a few batches with data, waits a random 0-2
triggers, writes the stop marker and times until ``run`` returns (the query
ended, the marker consumed, exit 0), then starts the job again on the same
checkpoint for the next stop. The job keeps up or falls behind as this
machine allows: behind, its batches run back to back, which is the load
under which the old stop never found its quiet moment.

Bar, from figures of the same run: every stop ends within one trigger
interval plus the slowest batch of the run (Spark's own
``durationMs.triggerExecution`` of each batch with data, trigger to
checkpoint commit; a start's first batch, with its Python workers' start,
is left out: no stop comes before a start's third batch): the batch in
flight finishes, the next one starts within a trigger and is refused at
once. The JVM's own shutdown after ``run`` returns (``spark.stop()``, the
lease) is not in the figure: it is the same whatever the load.
``tests/bench/test_stop.py`` holds the same bound for one stop in CI.
"""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.streaming.listener import StreamingQueryListener

from bench.framework import (
    REGION,
    Context,
    bars,
    code_version,
    figure,
    machine_load,
    write_result,
)
from job.driver import checked_checkpoint
from job.outcome import ExitCode
from job.query import run as run_job
from local.failures import ensure_topic
from local.table import sql_catalog
from model.config import JobConfig
from model.graceful_stop import StopRequest
from model.polling import poll_until
from producer.stream_writer import ensure_stream, kinesis_client

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

NAME: Final = "stop"
RATE: Final = 1_000
TRIGGER_SEC: Final = 1
SHARDS: Final = 2
STREAM: Final = "bench-stop"
STOPS: Final = 10
QUICK_STOPS: Final = 2
# Batches with data the (re)started query runs before a stop: past its first,
# slower batch, into its steady state.
WARM_BATCHES: Final = 3
START_TIMEOUT_SEC: Final = 300.0
STOP_TIMEOUT_SEC: Final = 300.0
# The producer, a child of its own: the job's record mix, one second's worth
# at a time (new ids each round), put at RATE, until it is killed.
PRODUCER: Final = """
import itertools, sys
from producer.events import MixSpec, generate, now_utc
from producer.stream_writer import kinesis_client, put_all
stream, region, endpoint, rate = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = kinesis_client(region, endpoint)
for second in itertools.count():
    spec = MixSpec(count=rate, id_prefix=f"stop{second}", seed=second)
    put_all(client, stream, generate(spec, now_utc()), rate=rate)
"""


@dataclass
class BatchTimes:
    """Batches with data, from the query's progress events (a listener on
    Spark's bus): their ``triggerExecution`` seconds. The first batch of each
    start (its Python workers starting, its first reads) is counted but not
    timed: a stop comes only after :data:`WARM_BATCHES`, never during one."""

    seconds: list[float] = field(default_factory=list)
    batches: int = 0
    starts: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, progress: Any) -> None:
        if int(progress.numInputRows or 0) == 0:
            return
        with self.lock:
            self.batches += 1
            run_id = str(progress.runId)
            if run_id not in self.starts:
                self.starts.add(run_id)
                return
            self.seconds.append(float(progress.durationMs["triggerExecution"]) / 1_000)

    @property
    def count(self) -> int:
        with self.lock:
            return self.batches


def listen(spark: SparkSession, into: BatchTimes) -> Any:
    """Attach a progress listener feeding ``into``; returns it (to remove)."""

    class Progress(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:  # noqa: N802 (Spark's name)
            return None

        def onQueryProgress(self, event: Any) -> None:  # noqa: N802 (Spark's name)
            into.add(event.progress)

        def onQueryIdle(self, event: Any) -> None:  # noqa: N802 (Spark's name)
            return None

        def onQueryTerminated(self, event: Any) -> None:  # noqa: N802 (Spark's name)
            return None

    listener = Progress()
    spark.streams.addListener(listener)
    return listener


@dataclass(frozen=True)
class Stops:
    """What the stops measured: seconds from marker to exit, per stop, and
    the slowest batch with data of the same run."""

    seconds: tuple[float, ...]
    slowest_batch_sec: float
    batches: int
    trigger_sec: float

    @property
    def bound_sec(self) -> float:
        return self.trigger_sec + self.slowest_batch_sec

    @property
    def within(self) -> bool:
        return max(self.seconds) <= self.bound_sec


def one_stop(
    spark: SparkSession, config: JobConfig, times: BatchTimes, rng: random.Random
) -> float:
    """Start the job, let it run :data:`WARM_BATCHES` batches with data, write
    the marker at a random moment and time until ``run`` returns exit 0."""
    assert config.stop_marker_path is not None
    marker = Path(config.stop_marker_path)
    codes: list[ExitCode | BaseException] = []

    def job() -> None:
        try:
            checkpoint = checked_checkpoint(config, None)
            codes.append(run_job(spark, config, stop=StopRequest(), checkpoint=checkpoint))
        except BaseException as exc:  # reported below, not lost in the thread
            codes.append(exc)

    before = times.count
    thread = threading.Thread(target=job, name="job", daemon=True)
    thread.start()
    poll_until(
        lambda: times.count >= before + WARM_BATCHES or bool(codes),
        timeout=START_TIMEOUT_SEC,
        interval=0.05,
        on_timeout=lambda: TimeoutError(f"no {WARM_BATCHES} batches in {START_TIMEOUT_SEC}s"),
    )
    if codes:
        raise RuntimeError(f"the job ended before its stop: {codes[0]}")
    time.sleep(rng.uniform(0, 2 * config.trigger_interval_sec))  # a random moment
    began = time.monotonic()
    marker.write_text("stop\n", encoding="utf-8")
    thread.join(STOP_TIMEOUT_SEC)
    took = time.monotonic() - began
    if thread.is_alive() or codes != [ExitCode.OK]:
        raise RuntimeError(f"the job did not stop with exit 0: {codes or 'still running'}")
    return took


def measure_stops(
    spark: SparkSession, config: JobConfig, endpoint: str, stops: int, seed: int = 52
) -> Stops:
    """``stops`` graceful stops of the job under :data:`RATE` records/s."""
    ensure_stream(kinesis_client(REGION, endpoint), config.stream_name, SHARDS)
    producer = subprocess.Popen(
        [sys.executable, "-c", PRODUCER, config.stream_name, REGION, endpoint, str(RATE)],
        stdout=subprocess.DEVNULL,
    )
    times = BatchTimes()
    listener = listen(spark, times)
    rng = random.Random(seed)
    try:
        seconds = tuple(one_stop(spark, config, times, rng) for _ in range(stops))
    finally:
        spark.streams.removeListener(listener)
        producer.kill()
        producer.wait(timeout=30)
    return Stops(seconds, max(times.seconds), times.count, float(config.trigger_interval_sec))


def stop_config(root: Path, aws_url: str, kafka_bootstrap: str) -> JobConfig:
    """The job's config (defaults but the trigger, no metrics) on the
    emulators, its checkpoint, catalog and stop marker under ``root``."""
    config = JobConfig.from_dict(
        {
            "instance_id": f"bench-{REGION}",
            "region": REGION,
            "stream_name": STREAM,
            "database": "bench_stop",
            "checkpoint_location": str(root / "checkpoint"),
            "kafka": {"topic": "failures.stop", "bootstrap_servers": kafka_bootstrap},
            "catalog": sql_catalog(root),
            "trigger_interval_sec": TRIGGER_SEC,
            "kinesis_endpoint_url": aws_url,
            "s3_endpoint_url": aws_url,
            "metrics": {"enabled": False},
            "stop_marker_path": str(root / "stop"),
        }
    )
    ensure_topic(kafka_bootstrap, config.kafka.topic)
    return config


def run(ctx: Context) -> None:
    endpoints = ctx.emulators.endpoints
    config = stop_config(ctx.scratch(NAME), endpoints.aws_url, endpoints.kafka_bootstrap)
    load_before = machine_load()
    found = measure_stops(ctx.spark, config, endpoints.aws_url, QUICK_STOPS if ctx.quick else STOPS)
    p50 = statistics.median(found.seconds)
    write_result(
        ctx,
        NAME,
        {
            "what": __doc__,
            "rate_records_per_sec": RATE,
            "trigger_sec": found.trigger_sec,
            "stops": len(found.seconds),
            "marker_to_exit_sec": [round(s, 3) for s in found.seconds],
            "p50_sec": round(p50, 3),
            "max_sec": round(max(found.seconds), 3),
            "slowest_batch_sec": round(found.slowest_batch_sec, 3),
            "batches": found.batches,
            "bound_sec": round(found.bound_sec, 3),
            "max_over_bound": round(max(found.seconds) / found.bound_sec, 3),
            "met": found.within,
            "code": code_version(),
            "load_before": load_before,
            "load_after": machine_load(),
        },
    )
    _chart(ctx, found)


def _chart(ctx: Context, found: Stops) -> None:
    labels: Sequence[str] = [f"stop {i + 1}" for i in range(len(found.seconds))]
    with figure(ctx, NAME) as (_fig, axes):
        bars(axes[0], labels, found.seconds, "stop marker to exit, 1,000 records/s", "seconds")
        axes[0].axhline(found.bound_sec, color="#c44e52", linestyle="--", linewidth=1)
