"""GetRecords records as Arrow record batches of SOURCE_SCHEMA (pure).

Why Arrow and not one tuple per record: Spark turns whatever a Python data
source returns into Arrow before the JVM sees it, and a ``pyarrow.RecordBatch``
is passed through as is (``records_to_arrow_batches`` in
``pyspark.sql.worker.plan_data_source_read``), while tuples go through a
per-field converter for every value. Building a shard's columns at once skips
that, and it runs in the thread that read the shard, while the other shards'
GetRecords calls are still waiting on the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from app.sources.schema import SOURCE_SCHEMA

if TYPE_CHECKING:
    import pyarrow as pa


def _arrow_schema() -> pa.Schema:
    """SOURCE_SCHEMA as Spark maps it to Arrow (timestamps in UTC): the JVM
    rejects a batch whose schema differs."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SOURCE_SCHEMA)


ARROW_SCHEMA: Final = _arrow_schema()


def records_to_batch(
    stream: str, shard_id: str, records: Sequence[dict[str, Any]]
) -> pa.RecordBatch:
    """GetRecords ``records`` of one shard as one batch, in their order.

    ``ApproximateArrivalTimestamp`` is a timezone-aware datetime (botocore
    parses it so); Arrow stores the instant in UTC, whatever its zone.
    """
    import pyarrow as pa

    count = len(records)
    columns = [
        [bytes(record["Data"]) for record in records],
        [stream] * count,
        [record.get("PartitionKey") for record in records],
        [str(record["SequenceNumber"]) for record in records],
        [record.get("ApproximateArrivalTimestamp") for record in records],
        [shard_id] * count,
    ]
    arrays = [
        pa.array(values, type=field.type)
        for values, field in zip(columns, ARROW_SCHEMA, strict=True)
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
