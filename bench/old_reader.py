"""The previous ``python-kinesis`` reader, kept for the benchmarks' "before".

This is ``job/sources/kinesis_python.py``'s reading as it was before executors
read the shards (commit 6c5bea2): a ``SimpleDataSourceStreamReader`` whose
``read(start)`` runs on the driver and reads and decodes every record, in up
to 8 threads. Registered as ``python-kinesis-driver`` so one session can run
it beside the current reader on the same records.

Only the reading is kept: where it starts, the shard list it reads and how it
tracks shards that end or appear are today's reader's own
(:class:`job.sources.kinesis_python.KinesisStreamReader`, held as ``planner``),
as are the fetch, offset and row code and the threads; the comparison is then
of where the records are read and decoded, not of two copies of the same code.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import SimpleDataSourceStreamReader

from job.sources import kinesis_python
from job.sources.kinesis_options import ReaderOptions, parse_options
from job.sources.kinesis_python import in_threads
from job.sources.kinesis_rows import records_to_batch
from model.kinesis_offsets import (
    ShardInfo,
    ShardState,
    offsets_from_json,
    offsets_to_json,
    readable_shards,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

FORMAT_NAME: Final = "python-kinesis-driver"


class KinesisStreamReader(SimpleDataSourceStreamReader):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        # Today's reader, for its driver side only: shard list, start, tracking.
        self.planner = kinesis_python.KinesisStreamReader(options)

    def __getstate__(self) -> dict[str, Any]:
        """Executors get the options only: no client, no driver-side state."""
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    def initialOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's API)
        return offsets_to_json(self.planner._initial_offsets())

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
        shards = self.planner.list_shards()
        current = self.planner._tracked(begin, shards)
        readable = readable_shards(current, shards)
        reader = self.planner.shard_reader  # one client, shared by the threads
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
        reader = self.planner.shard_reader
        stream = self.options.stream_name

        def replay(item: tuple[str, ShardState, str]) -> pa.RecordBatch:
            shard_id, first, stop = item
            return records_to_batch(
                stream, shard_id, list(reader.read_range(shard_id, first, stop))
            )

        yield from in_threads(replay, moved)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Kinesis keeps no consumer position; the checkpoint does."""


class KinesisDataSource(kinesis_python.KinesisDataSource):
    """Today's source (its schema and options) as ``python-kinesis-driver``, read
    by the previous reader: ``streamReader`` is not implemented, so Spark falls
    back to ``simpleStreamReader`` (pyspark.sql.datasource_internal._streamReader)."""

    def streamReader(self, schema: StructType) -> kinesis_python.KinesisStreamReader:  # noqa: N802 (Spark's API)
        """Not implemented, as in ``DataSource``: Spark falls back to the simple reader."""
        raise PySparkNotImplementedError(
            errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"}
        )

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def simpleStreamReader(self, schema: StructType) -> KinesisStreamReader:  # noqa: N802 (Spark's API)
        return KinesisStreamReader(parse_options(dict(self.options)))


def register(spark: SparkSession) -> None:
    """Make ``format("python-kinesis-driver")`` resolvable in ``spark``."""
    spark.dataSource.register(KinesisDataSource)
