"""Overhead: what a micro-batch costs when it carries (almost) nothing.

The job's streaming query (``prepare`` + ``foreachBatch(BatchProcessor)``,
processing-time trigger, Parquet file source with one file per batch) runs
while the benchmark drops a 1-record file, waits for its batch and for the
query to go idle, and again. Figures come from the query's progress events
(``durationMs.triggerExecution``: trigger to checkpoint commit), with
``spark.sql.streaming.noDataProgressEventInterval`` = 0 so that every idle
trigger reports too:

* 1-record batch: a trigger that ran a batch of 1 input row (bar: p50 < 1.5 s);
* empty trigger: a trigger that found no new data and ran no batch
  (bar: p50 < 0.5 s);
* no-data batch (reported, no bar): the batch Spark runs without input after
  the watermark moved, to evict expired state; it calls the job's
  ``foreachBatch`` with an empty frame.

Breakdown of the 1-record batch (medians): offset planning (latestOffset,
walCommit, getBatch, queryPlanning), the state store (the de-duplication
operator's update and commit time, inside addBatch), the job's one pass
(the stateful stage, failures to the broker, data files) and its table commit
from the job's per-batch log line, the Iceberg commit alone, and the
checkpoint commit (commitOffsets).

The same two bars are then measured on the job's query over the
``python-kinesis`` source (a moto stream, one PutRecord per sample, 1 s
trigger): there an idle trigger is the reader's ``latestOffset`` probing each
shard for one record, and a 1-record batch includes its task's GetRecords and
the recorded end.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from bench import stream
from bench.framework import REGION, Context, bars, figure, summary, write_result
from bench.latency import own_moto
from bench.latency_job import start_job_query
from producer.stream_writer import ensure_stream, kinesis_client

if TYPE_CHECKING:
    from pyspark.sql.streaming.query import StreamingQuery

NAME: Final = "overhead"
ONE_RECORD_BAR: Final = 1.5
EMPTY_BAR: Final = 0.5
TRIGGER_SEC: Final = 0.25
KINESIS_STREAM: Final = "bench-overhead"
NO_DATA_INTERVAL: Final = "spark.sql.streaming.noDataProgressEventInterval"


def _wait(
    query: StreamingQuery, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 120.0
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        if query.exception() is not None:
            raise RuntimeError(f"query failed: {query.exception()}")
        events = stream.progress_events(query)
        if done(events):
            return events
        if time.monotonic() > deadline:
            raise TimeoutError(f"no progress in {timeout:.0f}s")
        time.sleep(0.05)


def _idle_after(events: list[dict[str, Any]], count: int) -> int:
    """Idle triggers reported after the last batch that ran."""
    last_batch = max((i for i, e in enumerate(events) if stream.ran_batch(e)), default=-1)
    return sum(1 for e in events[last_batch + 1 :] if not stream.ran_batch(e)) - count


def _p50(values: list[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def _measure(
    ctx: Context, start: Callable[[], StreamingQuery], send_one: Callable[[int], None]
) -> tuple[list[dict[str, Any]], Any]:
    """Progress events of a query that gets one record at a time: each sent
    once the previous one's batch ran and 3 idle triggers followed."""
    spark = ctx.spark
    samples = 1 if ctx.quick else 12
    previous = spark.conf.get(NO_DATA_INTERVAL, None)
    spark.conf.set(NO_DATA_INTERVAL, "0")
    try:
        with stream.batch_timings() as split:
            query = start()
            try:
                # Sample 0 warms the query up (first batch: Python workers, catalog); not counted.
                for index in range(samples + 1):
                    send_one(index)
                    ones = index + 1
                    _wait(
                        query,
                        lambda ev, n=ones: (
                            sum(  # type: ignore[misc]
                                1 for e in ev if stream.ran_batch(e) and int(e["numInputRows"]) == 1
                            )
                            >= n
                            and _idle_after(ev, 3) >= 0
                        ),
                    )
                events = stream.progress_events(query)
            finally:
                query.stop()
    finally:
        if previous is None:
            spark.conf.unset(NO_DATA_INTERVAL)
        else:
            spark.conf.set(NO_DATA_INTERVAL, previous)
    return events, split


def _kinesis_events(ctx: Context) -> list[dict[str, Any]]:
    """The job's query as job.driver builds it on the python-kinesis source (a
    moto stream of 2 shards, 1 s trigger): one PutRecord per sample."""
    with own_moto() as endpoint:
        client = kinesis_client(REGION, endpoint)
        ensure_stream(client, KINESIS_STREAM, 2)
        config = stream.job_config(
            ctx,
            f"{NAME}_kinesis",
            stream_name=KINESIS_STREAM,
            kinesis_endpoint_url=endpoint,
            trigger_interval_sec=1,
            metrics={"enabled": False},
        )
        start = stream.now()

        def send_one(index: int) -> None:
            [data] = stream.unique_records(1, f"k-one{index}", start)
            client.put_record(StreamName=KINESIS_STREAM, Data=data, PartitionKey=str(index))

        events, _ = _measure(ctx, lambda: start_job_query(ctx.spark, config), send_one)
    return events


def _triggers(events: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The events after the warm-up batch: 1-record batches, no-data batches,
    idle triggers."""
    first_data = next(i for i, e in enumerate(events) if stream.ran_batch(e))
    counted = events[first_data + 1 :]
    return {
        "one": [e for e in counted if stream.ran_batch(e) and int(e["numInputRows"]) == 1],
        "no_data": [e for e in counted if stream.ran_batch(e) and int(e["numInputRows"]) == 0],
        "idle": [e for e in counted if not stream.ran_batch(e)],
    }


def _seconds(items: list[dict[str, Any]], key: str = "triggerExecution") -> list[float]:
    return [e["durationMs"].get(key, 0) / 1000 for e in items]


def run(ctx: Context) -> None:
    config = stream.job_config(ctx, NAME)
    source = Path(config.checkpoint_location).parent / "source"
    source.mkdir(parents=True)
    start = stream.now()

    def send_one(index: int) -> None:
        arrival = start + timedelta(seconds=index)
        stream.write_source_file(
            source, index, stream.unique_records(1, f"one{index}", arrival), arrival
        )

    events, split = _measure(
        ctx,
        lambda: stream.start_query(
            ctx.spark, config, source, available_now=False, trigger_sec=TRIGGER_SEC
        ),
        send_one,
    )
    kinesis = _triggers(_kinesis_events(ctx))
    kinesis_one = _p50(_seconds(kinesis["one"]))
    kinesis_idle = _p50(_seconds(kinesis["idle"]))

    # Skip everything up to the warm-up batch and the no-data batch after it.
    triggers = _triggers(events)
    one, no_data, idle = triggers["one"], triggers["no_data"], triggers["idle"]
    seconds = _seconds

    def ms_sum(e: dict[str, Any], *keys: str) -> float:
        return float(sum(e["durationMs"].get(k, 0) for k in keys)) / 1000

    one_ids = [int(e["batchId"]) for e in one]
    commits = split.commit[-len(one) :] if one else []
    breakdown = {
        "offset planning": _p50(
            [ms_sum(e, "latestOffset", "walCommit", "getBatch", "queryPlanning") for e in one]
        ),
        "state store": _p50(
            [
                (
                    stream.state_figures(e).get("allUpdatesTimeMs", 0)
                    + stream.state_figures(e).get("commitTimeMs", 0)
                )
                / 1000
                for e in one
            ]
        ),
        "one pass (failures to broker, data files)": _p50(
            [split.one_pass.get(b, 0.0) for b in one_ids]
        ),
        "table commit (+ expiry)": _p50([split.table.get(b, 0.0) for b in one_ids]),
        "of which Iceberg commit": _p50(commits),
        "checkpoint commit": _p50(seconds(one, "commitOffsets")),
    }
    one_p50 = _p50(seconds(one))
    idle_p50 = _p50(seconds(idle))
    no_data_p50 = _p50(seconds(no_data))
    write_result(
        ctx,
        NAME,
        {
            "what": __doc__,
            "trigger_interval_sec": TRIGGER_SEC,
            "one_record_batch": {
                "samples": len(one),
                "p50_seconds": round(one_p50, 3),
                "seconds": summary(seconds(one)),
                "bar": f"p50 < {ONE_RECORD_BAR}",
                "met": one_p50 < ONE_RECORD_BAR,
                "breakdown_p50_seconds": {k: round(v, 3) for k, v in breakdown.items()},
                "durations_ms": [e["durationMs"] for e in one],
            },
            "empty_trigger": {
                "samples": len(idle),
                "p50_seconds": round(idle_p50, 3),
                "seconds": summary(seconds(idle)),
                "bar": f"p50 < {EMPTY_BAR}",
                "met": idle_p50 < EMPTY_BAR,
                "durations_ms_first": [e["durationMs"] for e in idle[:10]],
            },
            "python_kinesis_source": {
                "what": (
                    "the same measure on the job's query over format python-kinesis "
                    "(moto, 2 shards, 1 s trigger): an idle trigger's latestOffset probes "
                    "each shard for one record; a 1-record batch's task reads its shard"
                ),
                "one_record_batch": {
                    "samples": len(kinesis["one"]),
                    "p50_seconds": round(kinesis_one, 3),
                    "seconds": summary(_seconds(kinesis["one"])),
                    "latest_offset_p50_seconds": round(
                        _p50(_seconds(kinesis["one"], "latestOffset")), 3
                    ),
                    "met": kinesis_one < ONE_RECORD_BAR,
                },
                "empty_trigger": {
                    "samples": len(kinesis["idle"]),
                    "p50_seconds": round(kinesis_idle, 3),
                    "seconds": summary(_seconds(kinesis["idle"])),
                    "met": kinesis_idle < EMPTY_BAR,
                },
            },
            "no_data_batch_after_watermark_move": {
                "samples": len(no_data),
                "p50_seconds": round(no_data_p50, 3),
                "seconds": summary(seconds(no_data)) if no_data else None,
                "durations_ms": [e["durationMs"] for e in no_data],
            },
        },
    )
    with figure(ctx, NAME, ncols=2) as (_, axes):
        bars(
            axes[0],
            ["empty trigger", "no-data batch", "1-record batch"],
            [idle_p50, no_data_p50, one_p50],
            "trigger to commit, p50",
            "seconds",
        )
        bars(axes[1], list(breakdown), list(breakdown.values()), "1-record batch, p50", "seconds")
