"""One ``python-kinesis`` task: read its shards for one batch, on an executor.

For each shard of the task, in this order of precedence:

1. the previous reader's batch being replayed (``ShardRead.until``): exactly
   ``(start, until]``;
2. an end recorded for this (batch, shard), by an earlier attempt of this
   task or by the run that crashed before Spark committed the batch: exactly
   ``(start, recorded end]``, so a replayed or retried batch has the rows the
   first one had;
3. otherwise a fresh bounded read (``kinesis.maxFetch*``). Its end is
   recorded write-once **before** any row leaves the task; if another attempt
   recorded first, this one's records are dropped and the winner's range is
   read instead. Nothing downstream saw a read that never recorded its end:
   Spark discards a failed task's output.

Replays always use GetRecords (:meth:`ShardReader.read_range`), whatever the
consumer type: a recorded range is a fixed set of records, which a shared
throughput read returns as well as a subscription would.

The one place that picks polling or enhanced fan-out is :func:`batch_reader`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from job.sources.kinesis_efo import EfoShardReader
from job.sources.kinesis_fetch import ShardBatch, ShardReader
from job.sources.kinesis_options import ReaderOptions
from job.sources.kinesis_rows import records_to_batch
from model.kinesis_ends import EndStore, ShardEnd
from model.kinesis_offsets import ShardInfo, ShardState
from model.kinesis_plan import ShardRead

BatchReader = Callable[[ShardInfo, ShardState], ShardBatch]
InThreads = Callable[
    [Callable[[ShardRead], "pa.RecordBatch | None"], list[ShardRead]],
    list["pa.RecordBatch | None"],
]

SUBSCRIBE_TO_SHARD = "SubscribeToShard"


def uses_fan_out(options: ReaderOptions) -> bool:
    """``kinesis.consumerType`` is SubscribeToShard (enhanced fan-out)."""
    return getattr(options, "consumer_type", "GetRecords") == SUBSCRIBE_TO_SHARD


def batch_reader(
    options: ReaderOptions, client: Any, polling: ShardReader, consumer_arn: str | None
) -> BatchReader:
    """How a fresh read of one shard is done: ``SubscribeToShard`` through the
    instance's registered consumer (``consumer_arn``, resolved once on the
    driver) when the options ask for enhanced fan-out, else GetRecords."""
    if uses_fan_out(options):
        if consumer_arn is None:
            raise ValueError("kinesis.consumerType SubscribeToShard: no consumer ARN was resolved")
        efo: BatchReader = EfoShardReader(
            client, options, consumer_arn, fallback=polling.next_batch
        ).next_batch
        return efo
    return polling.next_batch


def recorded_range(
    polling: ShardReader, shard_id: str, start: ShardState, end: ShardState
) -> list[dict[str, Any]]:
    """The records of ``(start, end]``; none when the read moved no sequence
    number (an empty read, or one that only found its closed shard's end)."""
    if end.after is None or end.after == start.after:
        return []
    return list(polling.read_range(shard_id, start, end.after))


def read_shard(
    batch: int,
    read: ShardRead,
    store: EndStore,
    polling: ShardReader,
    fresh: BatchReader,
) -> list[dict[str, Any]]:
    """The Kinesis records ``read`` contributes to ``batch`` (see the module
    docstring for which of the three ways applies)."""
    shard_id = read.shard.shard_id
    if read.until is not None:
        return list(polling.read_range(shard_id, read.start, read.until))
    recorded = store.get(batch, shard_id)
    if recorded is not None:
        return recorded_range(polling, shard_id, read.start, recorded.end)
    got = fresh(read.shard, read.start)
    mine = ShardEnd(got.state, got.caught_up, len(got.records))
    stands = store.put_once(batch, shard_id, mine)
    if stands == mine:
        return got.records
    return recorded_range(polling, shard_id, read.start, stands.end)


def read_task(
    stream: str,
    reads: list[ShardRead],
    work: Callable[[ShardRead], list[dict[str, Any]]],
    in_threads: InThreads,
) -> Iterator[pa.RecordBatch]:
    """The task's rows: one Arrow batch per shard that had records, in shard
    order; the shards of a group are read in threads (their GetRecords calls
    wait on the network, their decoding shares the task's one core)."""

    def rows(read: ShardRead) -> pa.RecordBatch | None:
        records = work(read)
        return records_to_batch(stream, read.shard.shard_id, records) if records else None

    for batch_rows in in_threads(rows, reads):
        if batch_rows is not None:
            yield batch_rows
