"""What each task of a micro-batch does with its rows: both outputs in ONE pass.

The batch is handed to the executors once (``mapInArrow`` over
:func:`output_rows`: the table's columns, then the failure columns, each
coordinate by its table name, :data:`model.record.COORDINATES`); each task
splits its rows by verdict:

* failure records go to the failure topic (:func:`job.sinks.kafka.deliver`,
  only when the task has failures; the Python worker keeps its producer
  between tasks);
* valid rows become Iceberg data files (:func:`job.table.files.write_data_files`),
  unless the driver found the batch already committed (a replay);

and yields ONE row with what it did: records sent, input rows, failures, the
oldest arrival, the event dates, and the pickled ``DataFile`` descriptions.

Why one pass and not two actions on a cached batch: every action re-runs or
re-reads the batch, and the cache itself costs a copy of every row
(``make bench`` throughput: the cache alone took as long as the Kafka and the
data-file steps together). The ordering the product promises still holds: the
driver commits the table only after every task returned, and a task returns
only after ``flush`` acknowledged each of its failure records.
"""

from __future__ import annotations

import pickle
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from job.python_worker import keep_archive_directories
from job.sinks.kafka import deliver
from job.table.files import write_data_files
from job.transform import event_columns
from model.config import EventField
from model.kafka_settings import KafkaSettings
from model.record import (
    BATCH_ID,
    COORDINATES,
    DATA,
    ERROR_CLASS,
    MESSAGE,
    REASON,
    UNDECLARED_FIELDS,
    UNDECLARED_KEYS,
)

# One row per task, back to the driver.
RESULT_SCHEMA: Final = (
    "sent long, rows long, failures long, oldest_us long, dates array<date>, "
    "data_files array<binary>, records long, reasons array<string>, reason_counts array<long>, "
    "keys array<string>, key_counts array<long>"
)
_FAILURE_COLUMNS: Final = (DATA, REASON, MESSAGE, ERROR_CLASS)


@dataclass(frozen=True)
class TaskOutcome:
    """The driver's sum over every task of one batch."""

    sent: int
    rows: int
    failures: int
    oldest_us: int | None
    dates: tuple[date, ...]
    data_files: list[Any]
    records: int
    failures_by_reason: dict[str, int]
    # Valid rows carrying each undeclared key (model.record.UNDECLARED_KEYS).
    undeclared_keys: dict[str, int]


def output_rows(batch: DataFrame, *, fields: Sequence[EventField], batch_id: int) -> DataFrame:
    """Both outputs of a batch in one frame, for one pass over it: the table's
    columns in its order (:func:`model.table_layout.table_columns`; ``batch_id``
    records which micro-batch wrote the row), then the failure columns.

    ``batch`` is what :func:`job.micro_batch.prepare` made: classified and
    de-duplicated, a valid row's bytes already dropped before the shuffle
    (:func:`job.dedup.dedup_input`), so they never cross into Python."""
    return batch.select(
        *(name for name, _ in event_columns(fields)),
        *(sf.col(c.source).alias(c.column) for c in COORDINATES),
        sf.lit(batch_id).cast("bigint").alias(BATCH_ID),
        UNDECLARED_FIELDS,
        UNDECLARED_KEYS,
        DATA,
        REASON,
        MESSAGE,
        ERROR_CLASS,
    )


def undeclared_key_counts(batch: pa.RecordBatch) -> Counter[str]:
    """How many valid rows of ``batch`` carry each undeclared key. Vectorized
    (Arrow's ``value_counts`` over the flattened key lists): no Python per row."""
    keys = batch.filter(pc.is_null(batch.column(REASON))).column(UNDECLARED_KEYS)
    if keys.null_count == len(keys):
        return Counter()
    counts = pc.value_counts(pc.list_flatten(keys))
    names = counts.field("values").to_pylist()
    return Counter(dict(zip(names, counts.field("counts").to_pylist(), strict=True)))


def split(
    batch: pa.RecordBatch, table_columns: tuple[str, ...]
) -> tuple[pa.RecordBatch, list[dict[str, Any]]]:
    """The valid rows in table shape, and the failure rows as dicts keyed by
    the coordinates' table columns (:func:`job.sinks.kafka.deliver` reads
    them by the same names)."""
    reason = batch.column(REASON)
    valid = batch.filter(pc.is_null(reason)).select(list(table_columns))
    failed = batch.filter(pc.is_valid(reason))
    if not failed.num_rows:
        return valid, []
    wanted = [*(c.column for c in COORDINATES), *_FAILURE_COLUMNS]
    return valid, failed.select(wanted).to_pylist()


def batch_task(
    kafka: KafkaSettings,
    metadata_json: str,
    io_properties: Mapping[str, str],
    *,
    table_columns: tuple[str, ...],
    arrival_column: str,
    time_column: str,
    write_files: bool,
) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """The ``mapInArrow`` function of one batch (everything in it is picklable:
    settings, the table's metadata as JSON; executors need no catalog)."""
    props = dict(io_properties)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # From this worker's next task on, no archive re-read before the task starts.
        keep_archive_directories()
        rows = 0
        oldest: int | None = None
        days: set[date] = set()
        valid: list[pa.RecordBatch] = []
        failed: list[dict[str, Any]] = []
        keys: Counter[str] = Counter()
        for batch in batches:
            if not batch.num_rows:
                continue
            rows += batch.num_rows
            arrivals = batch.column(arrival_column).cast(pa.timestamp("us", "UTC"))
            micros = pc.min(arrivals.cast(pa.int64())).as_py()
            if micros is not None:
                oldest = micros if oldest is None else min(oldest, micros)
            keys.update(undeclared_key_counts(batch))
            good, bad = split(batch, table_columns)
            failed.extend(bad)
            if good.num_rows:
                valid.append(good)
                # The UTC day: the zone is UTC whatever Spark's session zone says.
                stamps = good.column(time_column).cast(pa.timestamp("us", "UTC"))
                days.update(d for d in pc.unique(stamps.cast(pa.date32())).to_pylist() if d)
        # Failures first: a broker outage fails the task before it writes files.
        reasons = Counter(str(row[REASON]) for row in failed)
        sent = deliver(iter(failed), kafka) if failed else 0
        files = write_data_files(metadata_json, props, valid) if write_files else []
        yield pa.RecordBatch.from_pydict(
            {
                "sent": [sent],
                "rows": [rows],
                "failures": [len(failed)],
                "oldest_us": [oldest],
                "dates": [sorted(days)],
                "data_files": [[pickle.dumps(f) for f in files]],
                "records": [sum(int(f.record_count) for f in files)],
                "reasons": [list(reasons)],
                "reason_counts": [list(reasons.values())],
                "keys": [list(keys)],
                "key_counts": [list(keys.values())],
            },
            schema=pa.schema(
                [
                    ("sent", pa.int64()),
                    ("rows", pa.int64()),
                    ("failures", pa.int64()),
                    ("oldest_us", pa.int64()),
                    ("dates", pa.list_(pa.date32())),
                    ("data_files", pa.list_(pa.binary())),
                    ("records", pa.int64()),
                    ("reasons", pa.list_(pa.string())),
                    ("reason_counts", pa.list_(pa.int64())),
                    ("keys", pa.list_(pa.string())),
                    ("key_counts", pa.list_(pa.int64())),
                ]
            ),
        )

    return run


def combine(rows: Iterable[Any]) -> TaskOutcome:
    """The driver's side: every task's row summed (``DataFile`` objects unpickled)."""
    sent = total = failures = records = 0
    oldest: int | None = None
    days: set[date] = set()
    files: list[Any] = []
    by_reason: Counter[str] = Counter()
    by_key: Counter[str] = Counter()
    for row in rows:
        sent += int(row["sent"])
        total += int(row["rows"])
        failures += int(row["failures"])
        records += int(row["records"])
        if row["oldest_us"] is not None:
            value = int(row["oldest_us"])
            oldest = value if oldest is None else min(oldest, value)
        days.update(row["dates"] or ())
        files.extend(pickle.loads(bytes(blob)) for blob in row["data_files"] or ())
        for reason, count in zip(row["reasons"] or (), row["reason_counts"] or (), strict=True):
            by_reason[str(reason)] += int(count)
        for key, count in zip(row["keys"] or (), row["key_counts"] or (), strict=True):
            by_key[str(key)] += int(count)
    return TaskOutcome(
        sent=sent,
        rows=total,
        failures=failures,
        oldest_us=oldest,
        dates=tuple(sorted(days)),
        data_files=files,
        records=records,
        failures_by_reason=dict(sorted(by_reason.items())),
        undeclared_keys=dict(by_key.most_common()),
    )
