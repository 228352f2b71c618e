"""The bare read loops that latency benchmarks put the job beside.

One source for both kinds, so ``bench.efo`` (the loops alone) and
``bench.latency`` (the job's query, polling or enhanced fan-out, with the loop
of its kind as baseline) measure the same loop:

* :class:`PollLoop`: GetRecords on every shard from ``LATEST``, every 0.2 s;
* :func:`efo_loops`: one thread per shard calling
  :meth:`job.sources.kinesis_efo.EfoShardReader.next_batch` back to back (each
  batch continues the shard's open subscription), through a consumer of the
  loop's own.

Each loop notes the first time (``time.monotonic``) it holds each record's
``id``; a record whose data is not JSON with an ``id`` is not measured.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from bench import framework
from job.sources.kinesis_consumer import ensure_consumer
from job.sources.kinesis_efo import EfoShardReader, close_subscriptions
from job.sources.kinesis_fetch import make_client
from job.sources.kinesis_options import parse_options
from model.kinesis_offsets import ShardInfo, ShardState
from model.polling import poll_until

# Kinesis: at most 5 GetRecords calls per second per shard
# (https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html).
POLL_SEC: Final = 0.2
# A caught-up EFO batch returns at once (nothing buffered): the loop then
# waits this long before the next, instead of spinning a core.
IDLE_SEC: Final = 0.01
READY_TIMEOUT_SEC: Final = 60.0


@dataclass
class Seen:
    """First time (monotonic seconds) each key was seen, shared between threads."""

    at: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def first(self, key: str, when: float) -> None:
        with self.lock:
            self.at.setdefault(key, when)

    def note(self, records: Sequence[dict[str, Any]], now: float) -> None:
        """Each record's ``id`` (its data is JSON), first seen ``now``."""
        with self.lock:
            for record in records:
                try:
                    key = json.loads(record["Data"])["id"]
                except (ValueError, KeyError, TypeError):
                    continue  # a malformed record: not measured
                if isinstance(key, str):
                    self.at.setdefault(key, now)

    def snapshot(self) -> dict[str, float]:
        with self.lock:
            return dict(self.at)


class Loop(threading.Thread):
    """A reader thread; ``error`` keeps what stopped it."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.seen = Seen()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        # Set after the first read returned: iterators in place, subscription open.
        self.ready = threading.Event()


def wait_ready(loops: Sequence[Loop], timeout: float = READY_TIMEOUT_SEC) -> None:
    """Until every loop has read once; a loop that failed ends the wait."""

    def ready() -> bool:
        raise_failed(loops)
        return all(loop.ready.is_set() for loop in loops)

    poll_until(
        ready,
        timeout=timeout,
        interval=0.05,
        on_timeout=lambda: TimeoutError(f"read loops not reading after {timeout:.0f}s"),
    )


def seen_by(loops: Sequence[Loop]) -> dict[str, float]:
    """What a set of loops (e.g. one per shard) saw between them."""
    merged: dict[str, float] = {}
    for loop in loops:
        merged.update(loop.seen.snapshot())
    return merged


def raise_failed(loops: Sequence[Loop]) -> None:
    for loop in loops:
        if loop.error is not None:
            raise RuntimeError(f"read loop {loop.name} stopped") from loop.error


class PollLoop(Loop):
    """Every shard of ``stream`` with GetRecords from LATEST, every POLL_SEC."""

    def __init__(self, client: Any, stream: str) -> None:
        super().__init__("getrecords")
        self.client = client
        self.iterators = {
            s["ShardId"]: client.get_shard_iterator(
                StreamName=stream, ShardId=s["ShardId"], ShardIteratorType="LATEST"
            )["ShardIterator"]
            for s in client.list_shards(StreamName=stream)["Shards"]
        }

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                for shard, iterator in list(self.iterators.items()):
                    answer = self.client.get_records(ShardIterator=iterator, Limit=10_000)
                    self.seen.note(answer["Records"], time.monotonic())
                    self.iterators[shard] = answer["NextShardIterator"]
                self.ready.set()
                self.stop.wait(POLL_SEC)
        except BaseException as exc:  # reported by the benchmark, not lost in a thread
            self.error = exc


class EfoLoop(Loop):
    """One shard through EfoShardReader.next_batch, batch after batch; after
    an empty (caught-up) batch it waits IDLE_SEC."""

    def __init__(self, reader: Any, shard: Any, start: Any) -> None:
        super().__init__(f"efo-{shard.shard_id}")
        self.reader, self.shard, self.state = reader, shard, start
        self.batches = 0

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                batch = self.reader.next_batch(self.shard, self.state)
                self.seen.note(batch.records, time.monotonic())
                self.state = batch.state
                self.batches += 1
                self.ready.set()
                if not batch.records:
                    self.stop.wait(IDLE_SEC)
        except BaseException as exc:  # reported by the benchmark
            self.error = exc


def efo_options(front_url: str, stream: str, consumer: str) -> Any:
    """The reader's options for a bare EFO loop through ``front_url``."""
    return parse_options(
        {
            "kinesis.streamName": stream,
            "kinesis.region": framework.REGION,
            "kinesis.endpointUrl": front_url,
            "kinesis.consumerType": "SubscribeToShard",
            "kinesis.consumerName": consumer,
            # A batch per trigger as the job reads: bounded by records and time.
            "kinesis.maxFetchRecordsPerShard": "10000",
            "kinesis.maxFetchTimePerShardSec": "10",
            # Required by the source; the bare loop records no ends.
            "kinesis.metadataPath": "unused",
        }
    )


@contextlib.contextmanager
def efo_loops(front_url: str, stream: str, consumer: str) -> Iterator[list[EfoLoop]]:
    """EFO loops, one per shard of ``stream`` (which must exist), from now on
    (``AT_TIMESTAMP``), through ``consumer`` (registered if absent), each
    past its first batch (subscription open); stopped, their subscriptions
    closed, at the end."""
    options = efo_options(front_url, stream, consumer)
    client = make_client(options)
    arn = ensure_consumer(client, options)
    shards = [ShardInfo.from_api(s) for s in client.list_shards(StreamName=stream)["Shards"]]
    now = time.time()
    loops = [
        EfoLoop(EfoShardReader(make_client(options), options, arn), s, ShardState(ts=now))
        for s in shards
    ]
    for loop in loops:
        loop.start()
    try:
        wait_ready(loops)
        yield loops
    finally:
        for loop in loops:
            loop.stop.set()
        close_subscriptions(arn)
        for loop in loops:
            loop.join(15)


@contextlib.contextmanager
def poll_loops(client: Any, stream: str) -> Iterator[list[PollLoop]]:
    """A :class:`PollLoop` past its first pass (in a list, like
    :func:`efo_loops`), stopped at the end."""
    loop = PollLoop(client, stream)
    loop.start()
    try:
        wait_ready([loop])
        yield [loop]
    finally:
        loop.stop.set()
        loop.join(10)
