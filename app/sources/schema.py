"""The rows every Kinesis source hands to the job, whichever reader made them.

``CONNECTOR_SCHEMA`` is the output of the awslabs ``aws-kinesis`` connector
(README "Check Schema" and ``KinesisV2Table``: five nullable columns). The
connector does not expose the shard a record came from, but a failure record
needs it: on moto sequence numbers are per-shard counters, so stream +
sequence number alone is not a unique key there. The job therefore always sees
``SOURCE_SCHEMA``: the connector's five columns plus a nullable ``shardId``,
filled by the Python source and null behind the JVM connector (on real Kinesis
a sequence number is unique within the stream, so the key stays unique).
"""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import (
    BinaryType,
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
    [*CONNECTOR_SCHEMA.fields, StructField(SHARD_ID, StringType(), True)]
)

SOURCE_COLUMNS: Final = tuple(SOURCE_SCHEMA.fieldNames())
