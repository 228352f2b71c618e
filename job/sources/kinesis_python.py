"""``format("python-kinesis")``: Kinesis as a Spark 4 Python streaming source.

The job's own reader (boto3, the awslabs connector's option names, the same
columns plus ``shardId`` and ``subSequenceNumber``). It is a
``DataSourceStreamReader``: the driver plans, executors read.

* **Driver** (Spark's Python streaming source runner): ``latestOffset`` lists
  the shards (at most every ``kinesis.describeShardInterval``), works out
  where the next batch starts from the ends the previous batch's tasks
  recorded, and decides whether there is anything to read (below); the
  offset it returns names the batch, its start positions and the shards it
  reads (:mod:`model.kinesis_plan`). ``partitions`` makes one task per
  shard, or groups the shards into ``kinesis.python.readTasks`` tasks (the
  job sets the executors' total cores). The driver decodes no record.
* **Executors** (``read``, one call per task): each shard is read from the
  batch's start, bounded by ``kinesis.maxFetchRecordsPerShard`` and
  ``kinesis.maxFetchTimePerShardSec``, its end recorded write-once under
  ``kinesis.metadataPath`` before any row leaves the task, its records
  decoded and de-aggregated into Arrow batches there
  (:mod:`job.sources.kinesis_task`).

Whether a trigger has new data, without reading it on the driver: if any
shard's read in the last batch stopped on its bound (not caught up), or a
shard finished, or a new shard was listed, yes. Otherwise one GetRecords of at
most one record per readable shard (the awslabs connector's ``hasNewData``),
from an iterator kept across idle triggers; an idle trigger costs one small
call per shard and starts no Spark job. The probe's record is not used: the
batch's task reads it again.

Resharding: a child shard is read only once every listed parent is finished in
the batch's start positions, so its first records come in a later batch than
the parent's last. ``kinesis.failOnDataLoss``: a tracked unfinished shard that
Kinesis no longer lists fails the batch (or, when false, is marked finished).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from job.sources.kinesis_consumer import ensure_consumer
from job.sources.kinesis_fetch import DataLossError, ShardReader, make_client
from job.sources.kinesis_options import ReaderOptions, parse_options
from job.sources.kinesis_task import batch_reader, read_shard, read_task, uses_fan_out
from job.sources.schema import SOURCE_SCHEMA
from model.aws_clients import JOB_S3, client
from model.kinesis_ends import BATCHES_TO_RETAIN, EndStore, open_store
from model.kinesis_offsets import (
    Offsets,
    ShardInfo,
    ShardState,
    forget_finished,
    initial_offsets,
    missing_shards,
    readable_shards,
    with_new_shards,
)
from model.kinesis_plan import (
    NO_BATCH,
    BatchOffset,
    Resolved,
    ShardRead,
    groups,
    new_shards,
    resolve,
    shard_reads,
)
from model.storage_uri import is_s3

FORMAT_NAME: Final = "python-kinesis"
# Threads reading (or probing) shards in parallel within one process
# (connector: checkNewRecordThreads).
READ_THREADS: Final = 8

T = TypeVar("T")
R = TypeVar("R")


def in_threads(work: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """``work`` over ``items`` in up to READ_THREADS threads, results in order:
    a shard's GetRecords calls wait on the network, not on the GIL."""
    todo = list(items)
    if len(todo) <= 1:
        return [work(item) for item in todo]
    with ThreadPoolExecutor(min(READ_THREADS, len(todo)), thread_name_prefix="kinesis") as pool:
        return list(pool.map(work, todo))


@dataclass(frozen=True)
class KinesisPartition(InputPartition):
    """One task of batch ``batch``: its shards, and the enhanced fan-out
    consumer's ARN when the source subscribes (resolved once, on the driver)."""

    batch: int
    reads: tuple[ShardRead, ...]
    consumer_arn: str | None = None


class KinesisStreamReader(DataSourceStreamReader):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._reader: ShardReader | None = None
        self._store: EndStore | None = None
        self._initial: Offsets | None = None
        self._shards: list[ShardInfo] = []
        self._shards_at: float | None = None
        self._last: BatchOffset | None = None
        self._resolved: Resolved | None = None
        self._probes: dict[str, tuple[tuple[str | None, float | None], str]] = {}
        self._consumer_arn: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Executors get the options only: no client, no driver-side state."""
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    # ------------------------------------------------------------ clients

    @property
    def shard_reader(self) -> ShardReader:
        if self._reader is None:
            self._reader = ShardReader(make_client(self.options), self.options)
        return self._reader

    @property
    def store(self) -> EndStore:
        if self._store is None:
            s3 = None
            if is_s3(self.options.metadata_path):
                s3 = client(
                    "s3",
                    JOB_S3,
                    region=self.options.region,
                    endpoint_url=self.options.s3_endpoint_url,
                )
            self._store = open_store(self.options.metadata_path, s3)
        return self._store

    def consumer_arn(self) -> str | None:
        """The registered enhanced fan-out consumer (registered if absent),
        resolved once per driver; None when the source polls."""
        if not uses_fan_out(self.options):
            return None
        if self._consumer_arn is None:
            self._consumer_arn = str(ensure_consumer(self.shard_reader.client, self.options))
        return self._consumer_arn

    # ------------------------------------------------------------ driver

    def list_shards(self) -> list[ShardInfo]:
        """ListShards, cached for kinesis.describeShardInterval."""
        now = time.monotonic()
        interval = self.options.describe_shard_interval_ms / 1000.0
        if self._shards_at is None or now - self._shards_at >= interval:
            self._shards = self.shard_reader.list_shards()
            self._shards_at = now
        return self._shards

    def _initial_offsets(self) -> Offsets:
        """Computed once: asked twice, ``LATEST`` must give the same pin."""
        if self._initial is None:
            position = self.options.starting_position
            self._initial = initial_offsets(
                self.list_shards(), position.kind, time.time(), position.timestamp
            )
        return self._initial

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's API)
        return BatchOffset(NO_BATCH, self._initial_offsets()).to_json()

    def _tracked(self, start: Offsets, shards: list[ShardInfo]) -> Offsets:
        """``start`` against the current shard list: expired finished shards
        dropped, new shards added, vanished unfinished ones failed or closed."""
        gone = missing_shards(start, shards)
        if gone and self.options.fail_on_data_loss:
            raise DataLossError(
                f"kinesis.failOnDataLoss: shards {', '.join(gone)} of stream "
                f"{self.options.stream_name} are no longer listed; unread records expired"
            )
        current = with_new_shards(forget_finished(start, shards), shards)
        for shard in gone:
            current[shard] = ShardState(current[shard].after, current[shard].ts, done=True)
        return current

    def _resolve(self, offset: BatchOffset) -> Resolved:
        """Where the batch after ``offset`` starts; read from the store once
        per batch (idle triggers ask again and again)."""
        cached = self._resolved
        if cached is None or cached.batch != offset.batch or offset.batch == NO_BATCH:
            cached = resolve(offset, self.store.get)
            self._resolved = cached
        return cached

    def _probe(self, readable: list[ShardInfo], positions: Offsets) -> bool:
        """Does any readable shard hold a record after its position?"""
        reader = self.shard_reader

        def probe(info: ShardInfo) -> bool:
            state = positions.get(info.shard_id, ShardState())
            key = (state.after, state.ts)
            kept = self._probes.pop(info.shard_id, None)
            iterator = kept[1] if kept is not None and kept[0] == key else None
            answer = reader.probe(info, state, iterator)
            if answer.iterator is not None:
                self._probes[info.shard_id] = (key, answer.iterator)
            return answer.has_data

        return any(in_threads(probe, readable))

    def latestOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's API)
        """The next batch's offset, or the last one again when there is
        nothing to read (then Spark runs no batch)."""
        base = self._last
        if base is None:
            base = BatchOffset.from_json(self.initialOffset())
        resolved = self._resolve(base)
        shards = self.list_shards()
        tracked = self._tracked(resolved.positions, shards)
        readable = readable_shards(tracked, shards)
        if not readable:
            return base.to_json()
        more = resolved.more or new_shards(resolved.positions, shards)
        if not (more or self._probe(readable, tracked)):
            return base.to_json()
        return BatchOffset(resolved.batch + 1, tracked, tuple(readable)).to_json()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[KinesisPartition]:
        """The tasks of batch ``(start, end]``. Spark calls this for the last
        batch of its offset log when a query restarts, with ``start == end``
        if that batch was committed: either way ``end`` is the offset the next
        batch resolves from."""
        first = BatchOffset.from_json(start)
        last = BatchOffset.from_json(end)
        self._last = last
        if start == end:
            return []
        reads = shard_reads(first, last)
        arn = None if last.legacy else self.consumer_arn()
        return [
            KinesisPartition(last.batch, tuple(group), arn)
            for group in groups(reads, self.options.read_tasks)
        ]

    def commit(self, end: dict[str, Any]) -> None:
        """Drop the recorded ends of batches Spark no longer replays."""
        done = BatchOffset.from_json(end)
        if not done.legacy and done.batch - BATCHES_TO_RETAIN > 0:
            self.store.purge_before(done.batch - BATCHES_TO_RETAIN)

    # ------------------------------------------------------------ executors

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows of one task (runs on an executor)."""
        if not isinstance(partition, KinesisPartition):
            raise TypeError(f"python-kinesis: unexpected partition {partition!r}")
        polling = self.shard_reader
        fresh = batch_reader(self.options, polling.client, polling, partition.consumer_arn)
        work = partial(read_shard, partition.batch, store=self.store, polling=polling, fresh=fresh)
        yield from read_task(self.options.stream_name, list(partition.reads), work, in_threads)


class KinesisDataSource(DataSource):
    """Registered as ``python-kinesis``; options as in job.sources.aws_kinesis."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def streamReader(self, schema: StructType) -> KinesisStreamReader:  # noqa: N802 (Spark's API)
        return KinesisStreamReader(parse_options(dict(self.options)))


def register(spark: SparkSession) -> None:
    """Make ``format("python-kinesis")`` resolvable in ``spark`` (idempotent)."""
    spark.dataSource.register(KinesisDataSource)
