"""The producer of :mod:`bench.latency`: the job's record mix put at a steady
rate on a fixed schedule, in this process or in a child of its own.

The child imports this module: it imports no Spark (nor :mod:`bench.framework`,
which does), so the child starts in moments."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from ops.stream_writer import kinesis_client, put_all

if TYPE_CHECKING:
    from ops.events import SampleRecord

STREAM: Final = "bench-latency"
PUTS_PER_SECOND: Final = 10


def produce(
    client: Any, records: Sequence[SampleRecord], rate: int, puts: dict[str, float]
) -> float:
    """Put ``records`` at ``rate`` per second in calls of rate/10 records on a
    fixed schedule (a late call is followed at once by the next, until the
    schedule is met again); ``puts`` gets each valid id's first put time
    (``time.monotonic``: one clock for every process of the machine).
    Returns the seconds taken."""
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


def _produce_child(
    region: str, endpoint: str, records: Sequence[SampleRecord], rate: int, out: Any
) -> None:
    """A producer process: its own interpreter, so the driver's threads (py4j
    callbacks, the table watcher, the bare loop) never hold it back."""
    puts: dict[str, float] = {}
    started = time.monotonic()
    seconds = produce(kinesis_client(region, endpoint), records, rate, puts)
    out.send((started, seconds, puts))
    out.close()


def produce_elsewhere(
    region: str, endpoint: str, records: Sequence[SampleRecord], rate: int
) -> tuple[float, float, dict[str, float]]:
    """:func:`produce` in a child process: (started, seconds, put times)."""
    spawn = multiprocessing.get_context("spawn")
    receive, send = spawn.Pipe(duplex=False)
    child = spawn.Process(target=_produce_child, args=(region, endpoint, records, rate, send))
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
