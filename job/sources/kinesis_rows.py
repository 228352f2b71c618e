"""GetRecords records as Arrow record batches of SOURCE_SCHEMA (pure).

Why Arrow and not one tuple per record: Spark turns whatever a Python data
source returns into Arrow before the JVM sees it, and a ``pyarrow.RecordBatch``
is passed through as is (``records_to_arrow_batches`` in
``pyspark.sql.worker.plan_data_source_read``), while tuples go through a
per-field converter for every value. Building a shard's columns at once skips
that, and it runs in the thread that read the shard, while the other shards'
GetRecords calls are still waiting on the network.

KPL aggregates become one row per user record here (:mod:`model.kpl`):
its data, its partition key from the aggregate's key table, the aggregate's
sequence number and arrival time, and its ``subSequenceNumber``. The rows of
one batch are a function of the Kinesis records the batch read, so a replayed
batch (a recorded range, read again) expands the same aggregates into the same rows.
A corrupt aggregate stays ONE row with its bytes as read (the classification
names it ``bad_aggregate``). A batch without any aggregate pays one
vectorized prefix test over its data column.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema

from job.sources.schema import SOURCE_SCHEMA, SUB_SEQUENCE_NUMBER
from model.kpl import MAGIC, AggregateError, deaggregate

# SOURCE_SCHEMA as Spark maps it to Arrow (timestamps in UTC): the JVM rejects
# a batch whose schema differs.
ARROW_SCHEMA: Final[pa.Schema] = to_arrow_schema(SOURCE_SCHEMA)


def records_to_batch(
    stream: str, shard_id: str, records: Sequence[dict[str, Any]]
) -> pa.RecordBatch:
    """GetRecords ``records`` of one shard as one batch, in their order, each
    KPL aggregate replaced by its user records.

    ``ApproximateArrivalTimestamp`` is a timezone-aware datetime (botocore
    parses it so); it is turned to UTC here, before Arrow sees it, because
    with ``PYARROW_IGNORE_TIMEZONE`` set (importing ``pyspark.pandas`` sets
    it) Arrow keeps the wall clock and drops the zone.
    """
    data = pa.array([bytes(record["Data"]) for record in records], pa.binary())
    # One vectorized prefix test: a Python loop over the records cost as much
    # as building the data column itself.
    magic = pc.starts_with(data, pattern=MAGIC)
    if pc.any(magic).as_py():
        return _user_records_to_batch(stream, shard_id, records, magic.to_pylist())
    count = len(records)
    columns = [
        [stream] * count,
        [record.get("PartitionKey") for record in records],
        [str(record["SequenceNumber"]) for record in records],
        [_utc(record.get("ApproximateArrivalTimestamp")) for record in records],
        [shard_id] * count,
    ]
    fields = list(ARROW_SCHEMA)
    arrays = [
        data,
        *(
            pa.array(values, type=field.type)
            for values, field in zip(columns, fields[1 : len(columns) + 1], strict=True)
        ),
        pa.nulls(count, ARROW_SCHEMA.field(SUB_SEQUENCE_NUMBER).type),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def _utc(arrival: datetime | None) -> datetime | None:
    """The same instant in UTC (``None`` kept: the emulator may omit it)."""
    return None if arrival is None else arrival.astimezone(UTC)


def _user_records_to_batch(
    stream: str,
    shard_id: str,
    records: Sequence[dict[str, Any]],
    aggregated: Sequence[bool | None],
) -> pa.RecordBatch:
    """A batch holding at least one aggregate: record by record, each
    aggregate expanded where it stands."""
    payloads: list[bytes] = []
    keys: list[str | None] = []
    sequences: list[str] = []
    arrivals: list[Any] = []
    subs: list[int | None] = []
    for record, packed in zip(records, aggregated, strict=True):
        payload = bytes(record["Data"])
        sequence = str(record["SequenceNumber"])
        arrival = _utc(record.get("ApproximateArrivalTimestamp"))
        users = None
        if packed:
            try:
                users = deaggregate(payload)
            except AggregateError:
                users = None  # handed on whole: one bad_aggregate failure
        if users is None:
            payloads.append(payload)
            keys.append(record.get("PartitionKey"))
            sequences.append(sequence)
            arrivals.append(arrival)
            subs.append(None)
            continue
        for user in users:
            payloads.append(user.data)
            keys.append(user.partition_key)
            sequences.append(sequence)
            arrivals.append(arrival)
            subs.append(user.sub_sequence_number)
    count = len(payloads)
    columns: list[list[Any]] = [
        payloads, [stream] * count, keys, sequences, arrivals, [shard_id] * count, subs
    ]  # fmt: skip
    arrays = [
        pa.array(values, type=field.type)
        for values, field in zip(columns, ARROW_SCHEMA, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
