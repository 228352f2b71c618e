"""The normalized source frame: what the job's transforms may rely on."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from job.sources import normalized
from job.sources.schema import CONNECTOR_SCHEMA, SOURCE_SCHEMA


def test_connector_schema_is_the_awslabs_one() -> None:
    assert [(f.name, f.dataType.typeName(), f.nullable) for f in CONNECTOR_SCHEMA.fields] == [
        ("data", "binary", True),
        ("streamName", "string", True),
        ("partitionKey", "string", True),
        ("sequenceNumber", "string", True),
        ("approximateArrivalTimestamp", "timestamp", True),
    ]


def test_connector_rows_gain_a_null_shard_id_and_sub_sequence_and_keep_their_values(
    spark: Any,
) -> None:
    arrival = datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    frame = spark.createDataFrame(
        [(bytearray(b"{}"), "s", "pk", "4960", arrival)], CONNECTOR_SCHEMA
    )
    result = normalized(frame)
    assert result.schema == SOURCE_SCHEMA
    [row] = result.collect()
    assert (
        bytes(row.data), row.streamName, row.sequenceNumber, row.shardId, row.subSequenceNumber
    ) == (b"{}", "s", "4960", None, None)  # fmt: skip
    # collect() gives a naive local-time datetime: compare instants.
    assert row.approximateArrivalTimestamp.timestamp() == arrival.timestamp()


def test_python_source_rows_keep_their_shard_and_column_order(spark: Any) -> None:
    reordered = spark.createDataFrame(
        [(2, "shardId-000000000001", bytearray(b"x"), "s", "pk", "1", None)],
        "subSequenceNumber bigint, shardId string, data binary, streamName string, "
        "partitionKey string, sequenceNumber string, approximateArrivalTimestamp timestamp",
    )
    result = normalized(reordered)
    assert result.schema == SOURCE_SCHEMA
    row = result.collect()[0]
    assert (row.shardId, row.subSequenceNumber) == ("shardId-000000000001", 2)
