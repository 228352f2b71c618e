"""``format("python-kinesis")``: Kinesis as a Spark 4 Python streaming source.

The stand-in for the awslabs JVM connector wherever it is absent (locally,
against moto) and a working reader against real Kinesis: same option names,
same columns plus ``shardId``.

How a micro-batch is made:

* ``latestOffset`` (driver) lists shards (at most every
  ``kinesis.describeShardInterval``), then for every readable shard probes up
  to ``kinesis.maxFetchRecordsPerShard`` records to find where this batch ends.
  A backlog is therefore consumed in several bounded batches. The probe reads
  the records once more than strictly needed; that is the price of bounded,
  replayable batches when Spark 4.0's Python API gives no admission control.
* ``partitions`` makes one partition per shard that moved; ``read``
  (executors) re-reads exactly ``(start, end]`` of its shard.

Spark 4.0 does not pass the start offset to ``latestOffset``; the reader keeps
the end it last returned, and learns it on restart from ``partitions``, which
Spark calls with the latest offset in the checkpoint
(``AcceptsLatestSeenOffset``) before asking for the next one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC
from typing import TYPE_CHECKING, Any, Final

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from app.sources.kinesis_fetch import DataLossError, ShardReader, make_client
from app.sources.kinesis_offsets import (
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
from app.sources.kinesis_options import ReaderOptions, parse_options
from app.sources.schema import SOURCE_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

FORMAT_NAME: Final = "python-kinesis"
# Threads probing shards in parallel on the driver (connector: checkNewRecordThreads).
PROBE_THREADS: Final = 8


@dataclass(frozen=True)
class ShardRange(InputPartition):
    """One shard's records ``(start, end]`` of a batch; pickled to an executor."""

    shard_id: str
    start: dict[str, Any]
    end: str


def record_row(stream: str, shard_id: str, record: dict[str, Any]) -> tuple[Any, ...]:
    """A GetRecords record as a row of SOURCE_SCHEMA."""
    arrival = record.get("ApproximateArrivalTimestamp")
    return (
        bytes(record["Data"]),
        stream,
        record.get("PartitionKey"),
        str(record["SequenceNumber"]),
        arrival.astimezone(UTC) if arrival is not None else None,
        shard_id,
    )


class KinesisStreamReader(DataSourceStreamReader):
    def __init__(self, options: ReaderOptions) -> None:
        self.options = options
        self._reader: ShardReader | None = None
        self._position: Offsets | None = None
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

    def latestOffset(self) -> dict[str, Any]:  # noqa: N802 (Spark's API)
        start = self._position if self._position is not None else self._initial_offsets()
        shards = self.list_shards()
        gone = missing_shards(start, shards)
        if gone and self.options.fail_on_data_loss:
            raise DataLossError(
                f"kinesis.failOnDataLoss: shards {', '.join(gone)} of stream "
                f"{self.options.stream_name} are no longer listed; unread records expired"
            )
        current = with_new_shards(forget_finished(start, shards), shards)
        for shard in gone:
            current[shard] = ShardState(current[shard].after, current[shard].ts, done=True)
        readable = readable_shards(current, shards)
        end = dict(current)
        if readable:
            reader = self.shard_reader  # one client, shared by the probe threads
            workers = min(PROBE_THREADS, len(readable))
            with ThreadPoolExecutor(workers, thread_name_prefix="kinesis-probe") as pool:
                probed = pool.map(
                    lambda info: (
                        info.shard_id,
                        reader.probe(info, current[info.shard_id]),
                    ),
                    readable,
                )
                end.update(probed)
        self._position = end
        return offsets_to_json(end)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[ShardRange]:
        begin = offsets_from_json(start)
        finish = offsets_from_json(end)
        self._position = finish
        ranges = []
        for shard_id in sorted(finish):
            stop = finish[shard_id].after
            first = begin.get(shard_id, ShardState())
            if stop is not None and stop != first.after:
                ranges.append(ShardRange(shard_id, first.to_json(), stop))
        return ranges

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if not isinstance(partition, ShardRange):
            raise TypeError(f"python-kinesis: unexpected partition {partition!r}")
        stream = self.options.stream_name
        start = ShardState.from_json(partition.start)
        for record in self.shard_reader.read_range(partition.shard_id, start, partition.end):
            yield record_row(stream, partition.shard_id, record)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Kinesis keeps no consumer position; the checkpoint does."""

    def stop(self) -> None:
        self._reader = None


class KinesisDataSource(DataSource):
    """Registered as ``python-kinesis``; options as in app.sources.aws_kinesis."""

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
