"""EFO latency: from a record's put to its arrival in the enhanced fan-out read loop.

The baseline the job's EFO latency (``bench.latency_efo``) is put beside:
the job's own EFO reader (:class:`job.sources.kinesis_efo.EfoShardReader`) in
a bare loop, one thread per shard calling ``next_batch`` back to back (each
batch continues the shard's open subscription), against the harness's
SubscribeToShard endpoint (:mod:`local.efo_endpoint`, a child process) before
a moto server of this benchmark's own (:mod:`local.moto_server`).

After a caught-up (empty) batch the loop waits 10 ms before the next, so it
does not spin; in the job a shard's batch is read once per trigger.

A producer process puts ``{"id": ...}`` records on a 2-shard stream at 1,000
records/s (one ``PutRecords`` of 100 every 0.1 s; quick: 200 records/s) and
notes each record's put time (``time.monotonic``: one clock for every
process of the machine); a reader notes when it first holds the record.
latency = received - put. In the same run, on the same stream, the bare
GetRecords loop (every shard from ``LATEST``, polling every 0.2 s: Kinesis
allows 5 calls per second per shard) measures the same thing for polling.
Each window of 60 s (quick: one of 5 s) is a repeat; its p50/p99 are reported.

What this does and does not show: locally the endpoint learns of new records
by polling moto every 20 ms (it is a stand-in; Kinesis pushes, ~70 ms by AWS's
figure), so the EFO figure is the reader's path (subscription, event-stream
parse, hand-over between batches) plus that poll, not AWS's delivery time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, Final

from bench import framework
from bench.framework import Context
from bench.latency_produce import put_ids_elsewhere
from bench.read_loops import Loop, efo_loops, poll_loops, raise_failed, seen_by
from local.efo_endpoint import read_stats
from local.emulators import LOOPBACK, start_efo_endpoint, start_moto
from local.summary import percentile
from producer.stream_writer import ensure_stream, kinesis_client

NAME: Final = "efo"
STREAM: Final = "bench-efo"
CONSUMER: Final = "bench-efo-loop"


@dataclass(frozen=True)
class Settings:
    """The stream, the load put on it and the windows that measure it."""

    shards: int
    rate: int  # records/s
    window_sec: float  # one repeat: its p50/p99
    settle_sec: float  # after a window's last put, for it to reach both loops


FULL: Final = Settings(shards=2, rate=1_000, window_sec=60.0, settle_sec=3.0)
# --quick (the smoke test): a lighter load, one short window (Context.timed_rounds).
QUICK: Final = replace(FULL, rate=200, window_sec=5.0)


def latencies(puts: dict[str, float], seen: dict[str, float]) -> list[float]:
    """received - put for every put id a reader received, in seconds."""
    return [seen[key] - put for key, put in puts.items() if key in seen]


@contextlib.contextmanager
def servers() -> Iterator[tuple[str, str, Any]]:
    """This benchmark's moto and SubscribeToShard front: (moto URL, front URL, front)."""
    moto = start_moto()
    try:
        url = f"http://{LOOPBACK}:{moto.port}"
        front = start_efo_endpoint(url)
        try:
            yield url, f"http://{LOOPBACK}:{front.port}", front
        finally:
            front.stop()
    finally:
        moto.stop()


def run(ctx: Context) -> None:
    load = QUICK if ctx.quick else FULL
    rate, window = load.rate, load.window_sec
    load_before = framework.machine_load()
    with servers() as (moto_url, front_url, _front):
        client = kinesis_client(framework.REGION, moto_url)
        ensure_stream(client, STREAM, load.shards)
        runs: list[dict[str, Any]] = []
        with (
            efo_loops(front_url, STREAM, CONSUMER) as efo,
            poll_loops(client, STREAM) as poll,
        ):
            loops: list[Loop] = [*efo, *poll]
            for index in range(ctx.timed_rounds):
                count = int(rate * window)
                first = index * count
                seconds, puts = put_ids_elsewhere(
                    framework.REGION, moto_url, stream=STREAM, first=first, count=count, rate=rate
                )
                time.sleep(load.settle_sec)  # the last puts reach both loops
                runs.append(_window(puts, seconds, seen_by(efo), seen_by(poll)))
                raise_failed(loops)
            efo_batches = sum(loop.batches for loop in efo)
        stats = read_stats(front_url)
    result: dict[str, Any] = {
        "what": "put -> received by a bare read loop, enhanced fan-out (EfoShardReader via "
        "the local SubscribeToShard endpoint) and polling (GetRecords every 0.2 s), "
        "same stream, same run",
        "rate_records_per_sec": rate,
        "shards": load.shards,
        "window_sec": window,
        "windows": runs,
        "efo_p99_sec": framework.summary([r["efo"]["p99_sec"] for r in runs]),
        "getrecords_p99_sec": framework.summary([r["getrecords"]["p99_sec"] for r in runs]),
        "efo_p50_sec": framework.summary([r["efo"]["p50_sec"] for r in runs]),
        "getrecords_p50_sec": framework.summary([r["getrecords"]["p50_sec"] for r in runs]),
        "subscriptions_served": stats["served"],
        "efo_batches": efo_batches,
        "endpoint_note": "the local endpoint polls moto every 20 ms per subscription: the EFO "
        "figure is the reader's path plus that poll, not Kinesis' push delay",
        "load_before": load_before,
        "load_after": framework.machine_load(),
    }
    framework.write_result(ctx, NAME, result)
    with framework.figure(ctx, NAME) as (_fig, axes):
        framework.bars(
            axes[0],
            ["EFO p50", "EFO p99", "GetRecords p50", "GetRecords p99"],
            [
                result["efo_p50_sec"]["median"],
                result["efo_p99_sec"]["median"],
                result["getrecords_p50_sec"]["median"],
                result["getrecords_p99_sec"]["median"],
            ],
            f"put -> received at {rate:,} records/s (median of windows)",
            "seconds",
        )


def _window(
    puts: dict[str, float], seconds: float, efo: dict[str, float], poll: dict[str, float]
) -> dict[str, Any]:
    def figures(seen: dict[str, float]) -> dict[str, Any]:
        found = latencies(puts, seen)
        if not found:
            raise RuntimeError("a read loop received none of the window's records")
        return {
            "received": len(found),
            "missing": len(puts) - len(found),
            "p50_sec": round(percentile(found, 50) or 0.0, 4),
            "p99_sec": round(percentile(found, 99) or 0.0, 4),
        }

    return {
        "put": len(puts),
        "put_seconds": round(seconds, 2),
        "achieved_rate": round(len(puts) / seconds, 1) if seconds else None,
        "efo": figures(efo),
        "getrecords": figures(poll),
    }
