"""The ``foreachBatch`` function: one micro-batch, both outputs, one shuffle.

The streaming plan hands each batch already classified and de-duplicated
(:func:`prepare`: the state store's exchange is the batch's only shuffle; the
batch never reads the table). Order of work in a batch:

1. the driver reads the table's committed-batch property (one read, whatever
   the table's history): a replay of a batch that already landed writes no
   data file again;
2. ONE pass over the batch (:mod:`job.sinks.batch_task`): each task sends its
   failure records to Kafka and writes its valid rows as Iceberg data files,
   and returns its figures (rows, failures, oldest arrival, event dates) with
   the files' descriptions. No cache, no second action, no ``Observation``;
3. the driver commits the files as ONE snapshot, exactly once
   (:mod:`job.table.commit`), after every task's failures were
   acknowledged, on the table read in step 1 (no second read: a commit by
   someone else since fails pyiceberg's optimistic check and is retried on
   the refreshed table);
4. now and then expire old snapshots; hand the figures to the metrics listener.

Any exception propagates: Spark stops the query without committing the batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Final

from pyiceberg.table import Table
from pyspark.sql import DataFrame

from job.dedup import deduplicated
from job.retry import with_retries
from job.sinks.batch_task import RESULT_SCHEMA as TASK_SCHEMA
from job.sinks.batch_task import TaskOutcome, batch_task, combine, output_rows
from job.table.catalog import ensure_table, file_io_properties
from job.table.commit import already_committed, commit_batch, expire_snapshots
from job.transform import classify
from model.config import JobConfig
from model.kafka_settings import KafkaSettings
from model.record import ARRIVAL, UNDECLARED_FIELDS, column_name
from model.table_layout import table_columns

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
    # Failure records per reason (model.record.REASONS), only reasons seen.
    failures_by_reason: tuple[tuple[str, int], ...] = ()
    # Valid rows per undeclared key, most frequent first (model.record.UNDECLARED_KEYS).
    undeclared_keys: tuple[tuple[str, int], ...] = ()


def _from_micros(micros: int | None) -> datetime | None:
    if micros is None:
        return None
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC)


def prepare(raw: DataFrame, config: JobConfig, *, seed: DataFrame | None = None) -> DataFrame:
    """Raw source rows -> what a batch processes: classified (narrow) and
    de-duplicated by the state store (the one shuffle).

    ``seed`` (static: the de-duplication key and the arrival time, as
    :func:`job.dedup_seed.read_seed` makes it) fills the state of a new
    checkpoint with ids the table already holds; Spark loads it in batch 0
    only, so the job passes it only while no batch is committed."""
    classified = classify(raw, fields=config.event_fields, max_record_bytes=config.max_record_bytes)
    return deduplicated(
        classified,
        id_column=column_name(config.id_field),
        horizon_hours=config.dedup_horizon_hours,
        seed=seed,
    )


def one_pass(
    batch: DataFrame,
    batch_id: int,
    *,
    config: JobConfig,
    kafka: KafkaSettings,
    table: Table,
    write_files: bool,
) -> TaskOutcome:
    """The batch's one Spark job: every task sends its failures and (unless
    ``write_files`` is off, for a replay) writes its data files; nothing is
    committed here."""
    task = batch_task(
        kafka,
        table.metadata.model_dump_json(),
        file_io_properties(config),
        table_columns=tuple(c.name for c in table_columns(config.event_fields)),
        arrival_column=ARRIVAL.column,
        time_column=column_name(config.event_time_field),
        write_files=write_files,
    )
    rows = output_rows(batch, fields=config.event_fields, batch_id=batch_id)
    return combine(rows.mapInArrow(task, TASK_SCHEMA).collect())


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
        config = self.config
        table = self.table
        query_id = self.query_id(batch)
        started = time.monotonic()
        # Read before the pass: a replay whose snapshot landed before the crash
        # re-sends its failures (at least once, keyed by coordinates) but
        # writes no data file again.
        with_retries(table.refresh, f"refresh {'.'.join(table.name())}", config.catalog)
        replay = already_committed(table, query_id, batch_id)
        outcome = one_pass(
            batch, batch_id, config=config, kafka=self.kafka, table=table, write_files=not replay
        )
        if outcome.sent != outcome.failures:
            raise RuntimeError(
                f"batch {batch_id}: {outcome.failures} failure records but "
                f"{outcome.sent} acknowledged by Kafka"
            )
        passed = time.monotonic()
        committed = False
        if replay and outcome.dates:
            log.warning(
                "batch %d of query %s is already in the table: not written again",
                batch_id,
                query_id,
            )
        elif outcome.data_files:
            commit = commit_batch(
                table,
                outcome.data_files,
                query_id=query_id,
                batch_id=batch_id,
                options=config.catalog,
                fresh=not replay,  # refreshed above for this batch
            )
            committed = commit.committed
            if committed and batch_id % config.table_maintenance.expire_every_batches == 0:
                expire_snapshots(table, config.table_maintenance)
        result = BatchResult(
            batch_id=batch_id,
            input_rows=outcome.rows,
            failure_records=outcome.failures,
            oldest_arrival=_from_micros(outcome.oldest_us),
            event_dates=outcome.dates,
            data_files=len(outcome.data_files),
            table_records=outcome.records,
            committed=committed,
            failures_by_reason=tuple(outcome.failures_by_reason.items()),
            undeclared_keys=tuple(outcome.undeclared_keys.items()),
        )
        finished = time.monotonic()
        log.info(
            "batch %d: %d records, %d failures, dates %s, %d rows in %d files%s; %.2fs "
            "(pass %.2fs, commit %.2fs)",
            batch_id,
            result.input_rows,
            result.failure_records,
            ",".join(d.isoformat() for d in result.event_dates) or "-",
            result.table_records,
            result.data_files,
            " (already committed: a replay)" if replay and result.event_dates else "",
            finished - started,
            passed - started,
            finished - passed,
        )
        if result.undeclared_keys:
            log.info(
                "batch %d: keys no event field declares (kept in %s): %s",
                batch_id,
                UNDECLARED_FIELDS,
                ", ".join(f"{key}={count}" for key, count in result.undeclared_keys[:10]),
            )
        if self.on_result is not None:
            self.on_result(result)
        return result
