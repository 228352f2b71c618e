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
:mod:`model.kpl`): every user record of one aggregate has the
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
    DataType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from model import record

# The source-side names of the record vocabulary (model.record), for the
# readers and the tests that build source rows.
DATA: Final = record.DATA
STREAM_NAME: Final = record.STREAM.source
PARTITION_KEY: Final = record.PARTITION_KEY.source
SEQUENCE_NUMBER: Final = record.SEQUENCE.source
ARRIVAL_TIMESTAMP: Final = record.ARRIVAL.source
SHARD_ID: Final = record.SHARD.source
SUB_SEQUENCE_NUMBER: Final = record.SUB_SEQUENCE.source

_SPARK_TYPES: Final[dict[str, DataType]] = {
    "string": StringType(),
    "long": LongType(),
    "timestamp": TimestampType(),
}
_TYPES: Final[dict[str, DataType]] = {
    DATA: BinaryType(),
    **{c.source: _SPARK_TYPES[c.type] for c in record.COORDINATES},
}

CONNECTOR_SCHEMA: Final = StructType(
    [StructField(name, _TYPES[name], True) for name in record.CONNECTOR_COLUMNS]
)

SOURCE_SCHEMA: Final = StructType(
    [StructField(name, _TYPES[name], True) for name in record.SOURCE_COLUMNS]
)
