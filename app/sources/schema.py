"""The rows every Kinesis source hands to the job, whichever reader made them.

``CONNECTOR_SCHEMA`` is the output of the awslabs ``aws-kinesis`` connector
(README "Check Schema" and ``KinesisV2Table``: five nullable columns). The
connector does not expose the shard a record came from, but a failure record
needs it: on moto sequence numbers are per-shard counters, so stream +
sequence number alone is not a unique key there. The job therefore always sees
``SOURCE_SCHEMA``: the connector's five columns plus a nullable ``shardId``,
filled by the Python source and null behind the JVM connector (on real Kinesis
a sequence number is unique within the stream, so the key stays unique).

``subSequenceNumber`` numbers the user records of a KPL aggregate (0, 1, ...;
:mod:`app.sources.kpl`): every user record of one aggregate has the
aggregate's sequence number, so without it two of them would share their
source coordinates. It is null on a plain record (and on a corrupt aggregate,
handed on whole). The ``aws-kinesis`` connector de-aggregates too, but its
schema has no such column (``KinesisClientFactory.kinesisSchema``; its reader
knows the number, it is not in the five columns it emits), so it is null
behind that connector as well (docs/source.md, "KPL aggregation").
"""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import (
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

DATA: Final = "data"
STREAM_NAME: Final = "streamName"
PARTITION_KEY: Final = "partitionKey"
SEQUENCE_NUMBER: Final = "sequenceNumber"
ARRIVAL_TIMESTAMP: Final = "approximateArrivalTimestamp"
SHARD_ID: Final = "shardId"
SUB_SEQUENCE_NUMBER: Final = "subSequenceNumber"

CONNECTOR_SCHEMA: Final = StructType(
    [
        StructField(DATA, BinaryType(), True),
        StructField(STREAM_NAME, StringType(), True),
        StructField(PARTITION_KEY, StringType(), True),
        StructField(SEQUENCE_NUMBER, StringType(), True),
        StructField(ARRIVAL_TIMESTAMP, TimestampType(), True),
    ]
)

SOURCE_SCHEMA: Final = StructType(
    [
        *CONNECTOR_SCHEMA.fields,
        StructField(SHARD_ID, StringType(), True),
        StructField(SUB_SEQUENCE_NUMBER, LongType(), True),
    ]
)

SOURCE_COLUMNS: Final = tuple(SOURCE_SCHEMA.fieldNames())
