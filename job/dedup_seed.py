"""The de-duplication state of a NEW checkpoint, seeded from the events table.

Why: a new checkpoint (the first start, or after the checkpoint of the old
``dropDuplicatesWithinWatermark`` operator was moved aside, docs/operate.md)
starts reading the stream at ``TRIM_HORIZON`` with an empty state. Every
record still in the stream would land again, and every re-send of an id the
old state remembered would pass. Seeding the state with the ids the table
already holds closes both: :func:`job.dedup.arrival_deduplicated` loads the
seed in batch 0 (``transformWithState``'s initial state), one ``Long`` and one
timer per id, exactly as if the ids had just been seen at their arrival time.

Which ids (:func:`seed_cutoff`): those whose arrival time is at or after
``now - (dedup_horizon_hours + stream_retention_hours)``. A record the stream
can still return arrived at most one retention ago, and the rule drops it when
its id arrived within the horizon before it; so an id older than the sum can
no longer make a readable record a duplicate, and one younger may. (The same
record replayed from the trim horizon is the case ``now - horizon`` covers;
the retention adds the re-sends of ids that landed up to a horizon earlier.)
The processor's timers drop a seeded id as soon as the watermark passes its
arrival plus the horizon, so an id seeded needlessly costs a moment of state.

How it reads the table, in a way that scales: pyiceberg plans the scan on the
driver (manifests only; the arrival-time filter prunes data files by their
column bounds) and the executors read the planned files, two columns each,
through pyiceberg's ``ArrowScan`` and FileIO, the same I/O path the batch
writes with (:mod:`job.table.files`). Not ``spark.read.parquet``: it
would need the warehouse's file system in Spark; EMR has EMRFS for ``s3://``,
but the local run's pyspark wheel has no S3 file system (no ``hadoop-aws``)
and a local warehouse may be on moto S3. Through FileIO the same code reads a
local warehouse, moto S3 and S3 on EMR.

An empty table seeds nothing and plans no Spark job; a non-empty one costs one
Spark job at start (read, keep the latest arrival per id, count), whose result
stays cached for batch 0 to load.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import BooleanExpression
from pyiceberg.expressions.parser import parse
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadataUtil
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from job.dedup import DEDUP_KEY
from job.table.catalog import file_io_properties
from model.config import JobConfig
from model.record import ARRIVAL, column_name

log = logging.getLogger(__name__)

# The key job.dedup.dedup_key gives a valid record: "id:" + its id.
ID_KEY_PREFIX: Final = "id:"
SEED_SCHEMA: Final = f"`{DEDUP_KEY}` string, `{ARRIVAL.source}` timestamp"
_TASK_SCHEMA: Final = "task binary"


@dataclass(frozen=True)
class Seed:
    """The seed frame (``DEDUP_KEY``, ``ARRIVAL.source``; cached) and what it holds."""

    frame: DataFrame
    ids: int
    files: int
    cutoff: datetime

    def release(self) -> None:
        """Drop the cached rows (once batch 0 has loaded them)."""
        self.frame.unpersist()


def seed_cutoff(now: datetime, horizon_hours: int, retention_hours: int) -> datetime:
    """The oldest arrival time worth seeding (module docstring). Pure."""
    return now.astimezone(UTC) - timedelta(hours=horizon_hours + retention_hours)


def arrival_filter(cutoff: datetime) -> BooleanExpression:
    """Rows that arrived at or after ``cutoff`` (the table's timestamps are UTC, naive)."""
    naive = cutoff.astimezone(UTC).replace(tzinfo=None)
    return parse(f"{ARRIVAL.column} >= '{naive.isoformat(timespec='microseconds')}'")


def seed_keys(ids: pa.Array, arrivals: pa.Array) -> pa.RecordBatch:
    """``id:<id>`` keys with their arrival as UTC instants; rows without an id
    or an arrival dropped. Pure (pyarrow)."""
    keep = pc.and_(pc.is_valid(ids), pc.is_valid(arrivals))
    ids = pc.filter(ids, keep).cast(pa.string())
    arrivals = pc.filter(arrivals, keep)
    keys = pc.binary_join_element_wise(pa.scalar(ID_KEY_PREFIX), ids, "")
    utc = arrivals.cast(pa.timestamp("us")).cast(pa.timestamp("us", tz="UTC"))
    return pa.RecordBatch.from_arrays([keys, utc], names=[DEDUP_KEY, ARRIVAL.source])


def _reader(
    metadata_json: str, io_properties: dict[str, str], id_column: str, cutoff: datetime
) -> Any:
    """The ``mapInArrow`` function: each input row is a pickled ``FileScanTask``."""

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        metadata = TableMetadataUtil.parse_raw(metadata_json)
        io = load_file_io(properties=io_properties, location=metadata.location)
        projected = metadata.schema().select(id_column, ARRIVAL.column)
        scan = ArrowScan(metadata, io, projected, arrival_filter(cutoff))
        for batch in batches:
            # Pickled by read_seed on the driver: our own bytes.
            tasks = [pickle.loads(raw) for raw in batch.column(0).to_pylist()]
            for read_batch in scan.to_record_batches(tasks):
                if read_batch.num_rows:
                    yield seed_keys(read_batch.column(id_column), read_batch.column(ARRIVAL.column))

    return read


def read_seed(
    spark: SparkSession, table: Table, config: JobConfig, *, now: datetime
) -> Seed | None:
    """The table's ids within the seed window (:func:`seed_cutoff`), one row per
    id with its latest arrival, cached and counted; None when there are none."""
    cutoff = seed_cutoff(now, config.dedup_horizon_hours, config.stream_retention_hours)
    if table.current_snapshot() is None:
        log.info("seed: table %s is empty; nothing to seed", ".".join(table.name()))
        return None
    id_column = column_name(config.id_field)
    scan = table.scan(
        row_filter=arrival_filter(cutoff), selected_fields=(id_column, ARRIVAL.column)
    )
    tasks = [pickle.dumps(task) for task in scan.plan_files()]
    if not tasks:
        log.info("seed: no data file of %s holds an arrival since %s", table.name(), cutoff)
        return None
    slices = max(1, min(len(tasks), spark.sparkContext.defaultParallelism * 2))
    listed = spark.createDataFrame(
        spark.sparkContext.parallelize([(t,) for t in tasks], slices), _TASK_SCHEMA
    )
    reader = _reader(
        table.metadata.model_dump_json(), file_io_properties(config), id_column, cutoff
    )
    rows = listed.mapInArrow(reader, SEED_SCHEMA)
    latest = rows.groupBy(DEDUP_KEY).agg(sf.max(ARRIVAL.source).alias(ARRIVAL.source))
    frame = latest.persist()
    ids = frame.count()
    if ids == 0:
        frame.unpersist()
        log.info("seed: %d data files planned, no id arrived since %s", len(tasks), cutoff)
        return None
    return Seed(frame=frame, ids=ids, files=len(tasks), cutoff=cutoff)
