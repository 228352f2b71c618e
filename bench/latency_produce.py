"""The benchmarks' producers: records put at a steady rate on a fixed
schedule, in this process or in a child of its own. :mod:`bench.latency`
puts the job's record mix; :mod:`bench.efo` puts bare ``{"id": ...}`` records.

A child imports this module: it imports no Spark (nor :mod:`bench.framework`,
which does), so the child starts in moments."""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from producer.stream_writer import kinesis_client, put_all

if TYPE_CHECKING:
    from producer.events import SampleRecord

STREAM: Final = "bench-latency"
PUTS_PER_SECOND: Final = 10


def paced(
    count: int, rate: int, put: Callable[[int, int], Iterable[str]], puts: dict[str, float]
) -> float:
    """Put ``count`` items at ``rate`` per second in calls of rate/10 items on
    a fixed schedule (a late call is followed at once by the next, until the
    schedule is met again). ``put(start, stop)`` puts items ``start`` to
    ``stop - 1`` and returns the ids to note; ``puts`` gets each id's first
    put time (``time.monotonic``: one clock for every process of the
    machine). Returns the seconds taken."""
    per_call = max(1, rate // PUTS_PER_SECOND)
    started = time.monotonic()
    for index in range(0, count, per_call):
        wait = started + index / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        issued = time.monotonic()
        for key in put(index, min(count, index + per_call)):
            puts.setdefault(key, issued)
    return time.monotonic() - started


def produce(
    client: Any, records: Sequence[SampleRecord], rate: int, puts: dict[str, float]
) -> float:
    """Put ``records`` at ``rate`` per second (:func:`paced`); ``puts`` gets
    each valid id's first put time. Returns the seconds taken."""

    def put(start: int, stop: int) -> list[str]:
        chunk = records[start:stop]
        put_all(client, STREAM, chunk)
        return [r.event_id for r in chunk if r.event_id is not None and not r.is_failure]

    return paced(len(records), rate, put, puts)


def put_ids(
    client: Any, stream: str, first: int, count: int, rate: int
) -> tuple[float, dict[str, float]]:
    """``count`` records ``{"id": "e<n>"}`` from ``n = first`` on ``stream``
    at ``rate`` per second (:func:`paced`): (seconds taken, {id: put time})."""

    def put(start: int, stop: int) -> list[str]:
        ids = [f"e{first + n}" for n in range(start, stop)]
        client.put_records(
            StreamName=stream,
            Records=[{"Data": json.dumps({"id": i}).encode(), "PartitionKey": i} for i in ids],
        )
        return ids

    puts: dict[str, float] = {}
    return paced(count, rate, put, puts), puts


def in_child(target: Callable[..., None], limit: float, what: str, **kwargs: Any) -> Any:
    """``target(**kwargs, out=...)`` in a process of its own (its own
    interpreter, so the driver's threads never hold it back): what it sends on
    ``out``. After ``limit`` seconds without it, ``TimeoutError`` naming ``what``."""
    spawn = multiprocessing.get_context("spawn")
    receive, send = spawn.Pipe(duplex=False)
    child = spawn.Process(target=target, kwargs={**kwargs, "out": send})
    child.start()
    send.close()
    try:
        if not receive.poll(limit):
            raise TimeoutError(f"{what} in {limit:.0f}s")
        return receive.recv()
    finally:
        child.join(30)
        if child.is_alive():
            child.terminate()


def _produce_child(
    *, region: str, endpoint: str, records: Sequence[SampleRecord], rate: int, out: Any
) -> None:
    puts: dict[str, float] = {}
    started = time.monotonic()
    seconds = produce(kinesis_client(region, endpoint), records, rate, puts)
    out.send((started, seconds, puts))
    out.close()


def produce_elsewhere(
    region: str, endpoint: str, records: Sequence[SampleRecord], rate: int
) -> tuple[float, float, dict[str, float]]:
    """:func:`produce` in a child process: (started, seconds, put times)."""
    limit = len(records) / rate * 4 + 120
    what = f"producer did not finish {len(records)} records"
    started, seconds, puts = in_child(
        _produce_child, limit, what, region=region, endpoint=endpoint, records=records, rate=rate
    )
    return float(started), float(seconds), dict(puts)


def _put_ids_child(
    *, region: str, endpoint: str, stream: str, first: int, count: int, rate: int, out: Any
) -> None:
    out.send(put_ids(kinesis_client(region, endpoint), stream, first, count, rate))
    out.close()


def put_ids_elsewhere(
    region: str, endpoint: str, *, stream: str, first: int, count: int, rate: int
) -> tuple[float, dict[str, float]]:
    """:func:`put_ids` in a child process."""
    limit = count / rate * 4 + 60
    what = f"producer did not put {count} records"
    ids = {"stream": stream, "first": first, "count": count, "rate": rate}
    seconds, puts = in_child(_put_ids_child, limit, what, region=region, endpoint=endpoint, **ids)
    return float(seconds), dict(puts)
