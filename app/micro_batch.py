"""The ``foreachBatch`` function: one micro-batch, both outputs, one shuffle.

The streaming plan hands each batch already classified and de-duplicated
(:func:`prepare`: the state store's exchange is the batch's only shuffle; the
batch never reads the table). Order of work in a batch:

1. persist the batch: the stateful stage runs once, both outputs read the cache;
2. send the failure records to Kafka (executors). The same scan feeds an
   ``Observation`` (input rows, failures, oldest arrival, event dates) so the
   figures cost no extra job and no shuffle;
3. executors write the valid rows as Iceberg data files
   (:mod:`app.sinks.iceberg_files`); the driver commits them as ONE snapshot,
   exactly once (:mod:`app.sinks.iceberg_commit`), after the failures were
   delivered;
4. now and then expire old snapshots; unpersist; hand the figures to the
   metrics listener.

Any exception propagates: Spark stops the query without committing the batch.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Final

from app.config import JobConfig
from app.sinks.iceberg_catalog import ensure_table, file_io_properties
from app.sinks.iceberg_commit import already_committed, commit_batch, expire_snapshots
from app.sinks.iceberg_files import RESULT_SCHEMA as FILES_SCHEMA
from app.sinks.iceberg_files import data_files_of, file_writer
from app.sinks.kafka import RESULT_SCHEMA, KafkaSettings, arrow_sender
from app.sources.schema import ARRIVAL_TIMESTAMP
from app.table_layout import column_name
from app.transform import (
    REASON,
    classify,
    deduplicated,
    failures,
    utc_date,
    valid_rows,
)

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyspark.sql import DataFrame

# Spark sets it on the thread that runs a streaming batch: the query's
# persistent id, the same after a restart from the same checkpoint.
QUERY_ID_PROPERTY: Final = "sql.streaming.queryId"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchResult:
    """What one micro-batch did; the listener turns it into metrics."""

    batch_id: int
    input_rows: int
    failure_records: int
    oldest_arrival: datetime | None
    event_dates: tuple[date, ...]
    data_files: int = 0
    table_records: int = 0
    # False when the batch had already been committed (a replay), or had no valid row.
    committed: bool = False


def _from_micros(micros: int | None) -> datetime | None:
    if micros is None:
        return None
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC)


def prepare(raw: DataFrame, config: JobConfig) -> DataFrame:
    """Raw source rows -> what a batch processes: classified (narrow) and
    de-duplicated by the state store (the one shuffle)."""
    classified = classify(raw, fields=config.event_fields, max_record_bytes=config.max_record_bytes)
    return deduplicated(
        classified,
        id_column=column_name(config.id_field),
        horizon_hours=config.dedup_horizon_hours,
    )


class BatchProcessor:
    """Callable for ``writeStream.foreachBatch``; also called directly by tests
    (with :func:`prepare`'d frames and an explicit ``query_id``)."""

    def __init__(
        self,
        config: JobConfig,
        kafka: KafkaSettings,
        on_result: Callable[[BatchResult], None] | None = None,
        *,
        table: Table | None = None,
        query_id: str | None = None,
    ) -> None:
        self.config = config
        self.kafka = kafka
        self.on_result = on_result
        self._table = table
        self._query_id = query_id

    @property
    def table(self) -> Table:
        if self._table is None:
            self._table = ensure_table(self.config)
        return self._table

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.process_batch(batch, batch_id)

    def query_id(self, batch: DataFrame) -> str:
        if self._query_id is not None:
            return self._query_id
        found = batch.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        if not found:
            raise RuntimeError(
                "no streaming query id on this thread: call process_batch from "
                "foreachBatch, or give BatchProcessor a query_id"
            )
        return found

    def process_batch(self, batch: DataFrame, batch_id: int) -> BatchResult:
        from pyspark import StorageLevel
        from pyspark.sql import Observation
        from pyspark.sql import functions as sf

        config = self.config
        table = self.table
        query_id = self.query_id(batch)
        time_column = column_name(config.event_time_field)
        prepared = batch.persist(StorageLevel.MEMORY_AND_DISK)
        started = time.monotonic()
        try:
            figures = Observation(f"batch_{batch_id}_{uuid.uuid4().hex[:8]}")
            observed = prepared.observe(
                figures,
                sf.count(sf.lit(1)).alias("rows"),
                sf.count_if(sf.col(REASON).isNotNull()).alias("failures"),
                sf.unix_micros(sf.min(ARRIVAL_TIMESTAMP)).alias("oldest_us"),
                # A string: py4j hands observed arrays back as Java objects.
                sf.array_join(
                    sf.collect_set(
                        sf.when(
                            sf.col(REASON).isNull(), utc_date(sf.col(time_column)).cast("string")
                        )
                    ),
                    ",",
                ).alias("dates"),
            )
            sent = 0
            for row in (
                failures(observed).mapInArrow(arrow_sender(self.kafka), RESULT_SCHEMA).collect()
            ):
                sent += int(row["sent"])
            seen = figures.get
            failed = int(seen["failures"])
            if sent != failed:
                raise RuntimeError(
                    f"batch {batch_id}: {failed} failure records but {sent} acknowledged by Kafka"
                )
            dates = tuple(
                sorted(date.fromisoformat(d) for d in (seen["dates"] or "").split(",") if d)
            )
            classified_at = time.monotonic()
            files = 0
            records = 0
            committed = False
            if dates and already_committed(table, query_id, batch_id):
                # A replay of a batch whose snapshot landed before the crash:
                # its failures were re-sent above (at least once, keyed by
                # coordinates); its rows are in the table already.
                log.warning(
                    "batch %d of query %s is already in the table: not written again",
                    batch_id,
                    query_id,
                )
            elif dates:
                rows = valid_rows(prepared, fields=config.event_fields, batch_id=batch_id)
                written = rows.mapInArrow(
                    file_writer(table, file_io_properties(config)), FILES_SCHEMA
                ).collect()
                outcome = commit_batch(
                    table,
                    data_files_of(written),
                    query_id=query_id,
                    batch_id=batch_id,
                    options=config.catalog,
                )
                files, records, committed = outcome.data_files, outcome.records, outcome.committed
                if committed and batch_id % config.table_maintenance.expire_every_batches == 0:
                    expire_snapshots(table, config.table_maintenance)
            result = BatchResult(
                batch_id=batch_id,
                input_rows=int(seen["rows"]),
                failure_records=failed,
                oldest_arrival=_from_micros(seen["oldest_us"]),
                event_dates=dates,
                data_files=files,
                table_records=records,
                committed=committed,
            )
        finally:
            prepared.unpersist()
        finished = time.monotonic()
        log.info(
            "batch %d: %d records, %d failures, dates %s, %d rows in %d files%s; %.2fs "
            "(classify + failures %.2fs, table %.2fs)",
            batch_id,
            result.input_rows,
            result.failure_records,
            ",".join(d.isoformat() for d in dates) or "-",
            records,
            files,
            "" if committed or not dates else " (already committed: a replay)",
            finished - started,
            classified_at - started,
            finished - classified_at,
        )
        if self.on_result is not None:
            self.on_result(result)
        return result
