"""The job's Kinesis source: one call, one normalized streaming frame.

``read_stream`` returns the columns of :data:`job.sources.schema.SOURCE_SCHEMA`
(``data, streamName, partitionKey, sequenceNumber,
approximateArrivalTimestamp, shardId, subSequenceNumber``) whichever reader ``config.source.format``
selects, so the transforms never branch on where records came from:

* ``aws-kinesis``: the awslabs JVM connector shipped in the EMR image; it has
  no shard or sub-sequence column, so ``shardId`` and ``subSequenceNumber``
  are null;
* ``python-kinesis``: the Python Data Source in :mod:`job.sources.kinesis_python`
  (boto3, same option names; executors read the shards), the default on
  emr-spark-8.1.0, locally and against moto; with ``consumer_type``
  SubscribeToShard its tasks read through enhanced fan-out
  (:mod:`job.sources.kinesis_efo`), whose consumer the driver registers.

``kinesis.startingPosition`` applies only when the checkpoint is empty: once a
checkpoint exists, both readers resume from the offsets stored in it.
"""

from __future__ import annotations

import logging

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from job.sources.aws_kinesis import connector_options, require_connector
from job.sources.kinesis_consumer import register_consumer
from job.sources.kinesis_options import CONSUMER_ARN, METADATA_PATH, READ_TASKS, S3_ENDPOINT_URL
from job.sources.kinesis_python import FORMAT_NAME, register
from model.config import JobConfig
from model.record import SHARD, SOURCE_COLUMNS, SUB_SEQUENCE

log = logging.getLogger(__name__)


def describe_source(config: JobConfig) -> str:
    """Which reader runs and why, as the job logs it at start (the stack
    records the why in the job's config; ``make preflight`` prints the same)."""
    source = config.source
    why = source.format_reason or "set in the job's configuration file"
    where = "; executors read the shards" if source.format == "python-kinesis" else ""
    return f"Kinesis source {source.format} ({source.consumer_type}): {why}{where}"


def read_stream(spark: SparkSession, config: JobConfig) -> DataFrame:
    """A streaming DataFrame of raw Kinesis records in the normalized schema."""
    options = connector_options(config)
    fmt = config.source.format
    log.info("%s", describe_source(config))
    if fmt == "aws-kinesis":
        require_connector(spark)  # exit 2 with the jar path, not a bare lookup error
        frame = spark.readStream.format("aws-kinesis").options(**options).load()
    elif fmt == "python-kinesis":
        register(spark)
        options.update(python_reader_options(spark, config))
        if config.source.consumer_type == "SubscribeToShard":
            # Once, on the driver, before the query: the stack's consumer (by
            # ARN) must be ACTIVE, or the start stops; the tasks subscribe
            # through it.
            log.info("enhanced fan-out consumer %s", register_consumer(options))
        frame = spark.readStream.format(FORMAT_NAME).options(**options).load()
    else:
        raise ValueError(f"source.format: {fmt!r} is not one of aws-kinesis, python-kinesis")
    return normalized(frame)


def python_reader_options(spark: SparkSession, config: JobConfig) -> dict[str, str]:
    """What ``python-kinesis`` needs beyond the connector's options: where its
    tasks record each batch's ends (inside the checkpoint), how many tasks a
    batch may have (Spark's default parallelism: the executors' total cores
    on a cluster, ``n`` for ``local[n]``), and the S3 endpoint for an
    ``s3://`` checkpoint."""
    options = {
        METADATA_PATH: config.source_ends_uri,
        READ_TASKS: str(spark.sparkContext.defaultParallelism),
    }
    if config.s3_endpoint_url:
        options[S3_ENDPOINT_URL] = config.s3_endpoint_url
    if config.source.consumer_type == "SubscribeToShard" and config.source.consumer_arn:
        options[CONSUMER_ARN] = config.source.consumer_arn
    return options


def normalized(frame: DataFrame) -> DataFrame:
    """``frame`` with exactly the SOURCE_SCHEMA columns, in order: the JVM
    connector has no ``shardId`` and no ``subSequenceNumber``, so they are
    added as nulls."""
    if SHARD.source not in frame.columns:
        frame = frame.withColumn(SHARD.source, sf.lit(None).cast("string"))
    if SUB_SEQUENCE.source not in frame.columns:
        frame = frame.withColumn(SUB_SEQUENCE.source, sf.lit(None).cast("bigint"))
    return frame.select(*SOURCE_COLUMNS)
