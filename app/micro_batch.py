"""The ``foreachBatch`` function: one micro-batch, both outputs, one shuffle.

Order of work in a batch (see :mod:`app.sinks.table` for why it is idempotent):

1. classify the raw records and persist the result: the source is read once,
   both outputs read the cache;
2. send the failure records to Kafka (executors). The same scan feeds an
   ``Observation`` (input rows, failures, oldest arrival, event dates) so the
   figures cost no extra job and no shuffle;
3. write the valid rows: one aggregation by id over (batch rows + stored ids of
   the touched dates) -- the batch's only ``Exchange`` -- then append;
4. unpersist, and hand the figures to the metrics listener.

Any exception propagates: Spark stops the query without committing the batch.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from app.sinks.kafka import RESULT_SCHEMA, KafkaSettings, arrow_sender
from app.sinks.table import (
    append,
    discard_abandoned_writes,
    ensure_table,
    qualified,
    register_partitions,
    stored_ids,
    table_location,
)
from app.sources.schema import ARRIVAL_TIMESTAMP
from app.transform import (
    REASON,
    classify,
    column_name,
    failures,
    latest_per_id,
    utc_date,
    valid_rows,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from app.config import JobConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchResult:
    """What one micro-batch did; the listener turns it into metrics."""

    batch_id: int
    input_rows: int
    failure_records: int
    oldest_arrival: datetime | None
    event_dates: tuple[date, ...]


def _from_micros(micros: int | None) -> datetime | None:
    if micros is None:
        return None
    return datetime.fromtimestamp(micros / 1_000_000, tz=UTC)


class BatchProcessor:
    """Callable for ``writeStream.foreachBatch``; also called directly by tests."""

    def __init__(
        self,
        config: JobConfig,
        kafka: KafkaSettings,
        on_result: Callable[[BatchResult], None] | None = None,
    ) -> None:
        self.config = config
        self.kafka = kafka
        self.on_result = on_result
        self.table = qualified(config.database, config.table)
        self._location: str | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.process_batch(batch, batch_id)

    def process_batch(self, batch: DataFrame, batch_id: int) -> BatchResult:
        from pyspark import StorageLevel
        from pyspark.sql import Observation
        from pyspark.sql import functions as sf

        config = self.config
        spark = batch.sparkSession
        if self._location is None:
            ensure_table(
                spark, config.database, config.table, config.event_fields, config.database_location
            )
            self._location = table_location(spark, self.table)
        time_column = column_name(config.event_time_field)
        classified = classify(
            batch, fields=config.event_fields, max_record_bytes=config.max_record_bytes
        ).persist(StorageLevel.MEMORY_AND_DISK)
        started = time.monotonic()
        try:
            figures = Observation(f"batch_{batch_id}_{uuid.uuid4().hex[:8]}")
            observed = classified.observe(
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
            if dates:
                discard_abandoned_writes(spark, self._location)
                register_partitions(spark, self.table, dates)
                fresh = latest_per_id(
                    valid_rows(
                        classified,
                        fields=config.event_fields,
                        event_time_field=config.event_time_field,
                        batch_id=batch_id,
                    ),
                    id_column=column_name(config.id_field),
                    time_column=time_column,
                    existing_ids=stored_ids(spark, self.table, column_name(config.id_field), dates),
                )
                append(fresh, self.table)
            result = BatchResult(
                batch_id=batch_id,
                input_rows=int(seen["rows"]),
                failure_records=failed,
                oldest_arrival=_from_micros(seen["oldest_us"]),
                event_dates=dates,
            )
        finally:
            classified.unpersist()
        finished = time.monotonic()
        log.info(
            "batch %d: %d records, %d failures, dates %s; %.2fs (classify + failures %.2fs, "
            "table %.2fs)",
            batch_id,
            result.input_rows,
            result.failure_records,
            ",".join(d.isoformat() for d in dates) or "-",
            finished - started,
            classified_at - started,
            finished - classified_at,
        )
        if self.on_result is not None:
            self.on_result(result)
        return result
