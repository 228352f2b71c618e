"""Latency through enhanced fan-out: put -> readable, the job's query reading
with ``source.consumer_type: SubscribeToShard``, beside the bare EFO loop.

The same benchmark as :mod:`bench.latency` (same producer, rate, record mix,
2 shards, 1 s trigger, table watcher, windows and p99 < 5 s bar), with two
differences:

* the job's ``kinesis_endpoint_url`` is the harness's SubscribeToShard front
  (:mod:`local.efo_endpoint`, which forwards every other call to this
  benchmark's moto server), and its source subscribes through its consumer
  ``bench-latency-job``;
* the baseline is the bare enhanced fan-out loop of :mod:`bench.efo`
  (:func:`bench.read_loops.efo_loops`: ``EfoShardReader.next_batch`` back to
  back per shard) through a consumer of its own, ``bench-latency-loop``, on
  the same stream in the same run.

Locally the front learns of new records by polling moto every 20 ms per
subscription (Kinesis pushes): both figures are the readers' paths plus that
poll, not AWS's delivery time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Final

from bench import efo, latency
from bench.framework import Context
from bench.read_loops import EfoLoop, efo_loops
from local.efo_endpoint import read_stats

NAME: Final = "latency_efo"
JOB_CONSUMER: Final = "bench-latency-job"
LOOP_CONSUMER: Final = "bench-latency-loop"


@contextlib.contextmanager
def servers() -> Iterator[tuple[str, str]]:
    """(moto URL: records are put there, the front's URL: the job reads there)."""
    with efo.servers() as (moto_url, front_url, _front):
        yield moto_url, front_url


def loops(
    _client: Any, front_url: str, stream: str
) -> contextlib.AbstractContextManager[list[EfoLoop]]:
    return efo_loops(front_url, stream, LOOP_CONSUMER)


def front_facts(front_url: str) -> dict[str, Any]:
    """The front's subscription counts, both consumers together: the bare loop
    keeps one per shard open for the run, so more than that were the job's."""
    return {"subscriptions": read_stats(front_url)}


EFO: Final = latency.Kind(
    name=NAME,
    # This module's differences first, then the benchmark they apply to.
    what=f"{__doc__}\n{latency.__doc__}",
    source={"consumer_type": "SubscribeToShard", "consumer_name": JOB_CONSUMER},
    label="bare EFO loop",
    baseline="put -> received by the bare enhanced fan-out loop (EfoShardReader.next_batch "
    "per shard, own consumer) through the local SubscribeToShard front, same stream",
    servers=servers,
    loops=loops,
    facts=front_facts,
)


def run(ctx: Context) -> None:
    latency.measure(ctx, EFO)
