"""The previous ``python-kinesis`` reader, kept for the benchmarks' "before".

This is ``job/sources/kinesis_python.py`` as it was before executors read the
shards (commit 6c5bea2): a ``SimpleDataSourceStreamReader`` whose
``read(start)`` runs on the driver and reads and decodes every record, in up
to 8 threads. Registered as ``python-kinesis-driver`` so one session can run
it beside the current reader on the same records. Only its docstring and its
registered name changed; it shares the current fetch, offset and row code.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, TypeVar

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

from job.sources.kinesis_fetch import DataLossError, ShardReader, make_client
from job.sources.kinesis_options import ReaderOptions, parse_options
from job.sources.kinesis_rows import records_to_batch
from job.sources.schema import SOURCE_SCHEMA
from model.kinesis_offsets import (
    Offsets,
    ShardInfo,
    ShardState,
    forget_finished,
    initial_offsets,
    missing_shards,
    offsets_from_json,
    offsets_to_json,
    readable_shards,
    with_new_shards,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

FORMAT_NAME: Final = "python-kinesis-driver"
# Threads reading shards in parallel (connector: checkNewRecordThreads).
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


class KinesisStreamReader(SimpleDataSourceStreamReader):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._reader: ShardReader | None = None
        self._initial: Offsets | None = None
        self._shards: list[ShardInfo] = []
        self._shards_at: float | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Executors get the options only: no client, no driver-side state."""
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    @property
    def shard_reader(self) -> ShardReader:
        if self._reader is None:
            self._reader = ShardReader(make_client(self.options), self.options)
        return self._reader

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
        return offsets_to_json(self._initial_offsets())

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

    def read(self, start: dict[str, Any]) -> tuple[Iterator[pa.RecordBatch], dict[str, Any]]:
        """The next batch after ``start``: its rows, one Arrow batch per shard
        that had records (job.sources.kinesis_rows), and its end offset.

        The batches come back as a list iterator: Spark's prefetch cache copies
        it (``copy.copy``) each time it hands the batch over, which a
        generator would not survive. Nothing new returns ``start`` itself, so
        the idle triggers Spark caches until the next commit share it (4.0.2 and
        4.1.1 cache one entry per idle trigger).
        """
        begin = offsets_from_json(start)
        shards = self.list_shards()
        current = self._tracked(begin, shards)
        readable = readable_shards(current, shards)
        reader = self.shard_reader  # one client, shared by the threads
        stream = self.options.stream_name

        def read_shard(info: ShardInfo) -> tuple[ShardState, pa.RecordBatch | None]:
            batch = reader.next_batch(info, current[info.shard_id])
            rows = records_to_batch(stream, info.shard_id, batch.records) if batch.records else None
            return batch.state, rows

        end = dict(current)
        batches = []
        for info, (state, rows) in zip(readable, in_threads(read_shard, readable), strict=True):
            end[info.shard_id] = state
            if rows is not None:
                batches.append(rows)
        end_json = offsets_to_json(end)
        return iter(batches), (start if end_json == start else end_json)

    def readBetweenOffsets(  # noqa: N802 (Spark's API)
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> Iterator[pa.RecordBatch]:
        """Exactly the rows ``read(start)`` returned with ``end``, in the same
        order: every shard that moved, ``(start, end]``, in shard order."""
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        moved = [
            (shard_id, begin.get(shard_id, ShardState()), state.after)
            for shard_id, state in sorted(finish.items())
            if state.after is not None and state.after != begin.get(shard_id, ShardState()).after
        ]
        reader = self.shard_reader
        stream = self.options.stream_name

        def replay(item: tuple[str, ShardState, str]) -> pa.RecordBatch:
            shard_id, first, stop = item
            return records_to_batch(
                stream, shard_id, list(reader.read_range(shard_id, first, stop))
            )

        yield from in_threads(replay, moved)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Kinesis keeps no consumer position; the checkpoint does."""


class KinesisDataSource(DataSource):
    """Registered as ``python-kinesis``; options as in job.sources.aws_kinesis."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def simpleStreamReader(self, schema: StructType) -> KinesisStreamReader:  # noqa: N802 (Spark's API)
        return KinesisStreamReader(parse_options(dict(self.options)))


def register(spark: SparkSession) -> None:
    """Make ``format("python-kinesis-driver")`` resolvable in ``spark``."""
    spark.dataSource.register(KinesisDataSource)
