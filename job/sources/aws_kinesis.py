"""Options for the awslabs ``aws-kinesis`` connector, built from the job config.

Pure: ``connector_options`` turns a :class:`JobConfig` into the string options
``spark.readStream.format("aws-kinesis")`` takes. The Python source accepts the
same names, so one dict feeds either reader. Names and value formats follow the
connector's ``KinesisOptions``:

* ``kinesis.endpointUrl`` is required by the connector (no default), so the
  public regional endpoint is filled in when the config has none;
* ``kinesis.describeShardInterval`` is a Spark time string (``"30s"``);
* ``kinesis.maxFetchTimePerShardSec`` is whole seconds and must be >= 10
  (``model.config.MIN_FETCH_TIME_SEC``; the config model enforces it);
* ``kinesis.startingPosition`` defaults to ``LATEST`` in the connector, which
  silently skips the backlog on a first start: we always pass it (our default
  ``TRIM_HORIZON``). It applies only while the checkpoint is empty;
* ``kinesis.failOnDataLoss`` defaults to false in the connector: we pass it
  (our default true) so an expired or missing shard stops the query.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pyspark.sql import SparkSession

from model.config import ConfigError, JobConfig

FORMAT: Final = "aws-kinesis"
# Where EMR images ship the awslabs connector (EMR Release Guide: releases
# 7.1.0 and later; docs/deploy.md, "The Kinesis connector on emr-spark-8.0.0").
CONNECTOR_DIR: Final = "/usr/share/aws/kinesis/spark-sql-kinesis/lib/"

# Option names, shared with job.sources.kinesis_python.
STREAM_NAME: Final = "kinesis.streamName"
REGION: Final = "kinesis.region"
KINESIS_REGION: Final = "kinesis.kinesisRegion"
ENDPOINT_URL: Final = "kinesis.endpointUrl"
STARTING_POSITION: Final = "kinesis.startingPosition"
DESCRIBE_SHARD_INTERVAL: Final = "kinesis.describeShardInterval"
MAX_FETCH_RECORDS_PER_SHARD: Final = "kinesis.maxFetchRecordsPerShard"
MAX_FETCH_TIME_PER_SHARD_SEC: Final = "kinesis.maxFetchTimePerShardSec"
FAIL_ON_DATA_LOSS: Final = "kinesis.failOnDataLoss"
CONSUMER_TYPE: Final = "kinesis.consumerType"
CONSUMER_NAME: Final = "kinesis.consumerName"
RECORDS_PER_FETCH: Final = "kinesis.getRecords.numberOfRecordsPerFetch"
CLIENT_NUM_RETRIES: Final = "kinesis.clientNumRetries"
CLIENT_RETRY_INTERVALS_MS: Final = "kinesis.clientRetryIntervalsMs"
CLIENT_MAX_RETRY_INTERVAL_MS: Final = "kinesis.clientMaxRetryIntervalMs"


def default_endpoint(region: str) -> str:
    """The public Kinesis endpoint of ``region`` (China regions use ``.com.cn``)."""
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"https://kinesis.{region}.{suffix}"


def connector_options(config: JobConfig) -> dict[str, str]:
    """The reader options for ``config``, as strings.

    Nothing is checked here: a :class:`JobConfig` is validated when it is built
    (the fetch-time minimum, a positive describe interval and a consumer name
    for enhanced fan-out are rules of the model), so a value the connector
    rejects never gets this far.
    """
    source = config.source
    options = {
        STREAM_NAME: config.stream_name,
        REGION: config.region,
        KINESIS_REGION: config.region,
        ENDPOINT_URL: config.kinesis_endpoint_url or default_endpoint(config.region),
        STARTING_POSITION: source.starting_position,
        DESCRIBE_SHARD_INTERVAL: f"{source.describe_shard_interval_sec}s",
        MAX_FETCH_RECORDS_PER_SHARD: str(source.max_fetch_records_per_shard),
        MAX_FETCH_TIME_PER_SHARD_SEC: str(source.max_fetch_time_per_shard_sec),
        FAIL_ON_DATA_LOSS: "true" if source.fail_on_data_loss else "false",
        CONSUMER_TYPE: source.consumer_type,
    }
    if source.consumer_type == "SubscribeToShard" and source.consumer_name is not None:
        options[CONSUMER_NAME] = source.consumer_name
    return options


def require_connector(spark: SparkSession, lookup: Callable[[str], object] | None = None) -> None:
    """Fail at start, with the fix, when ``aws-kinesis`` does not resolve.

    Why: without the connector on the classpath Spark only fails when the query
    starts, with a bare ``DATA_SOURCE_NOT_FOUND`` that names neither the jar
    nor how to get it. Raising :class:`model.config.ConfigError` makes the job
    exit 2 (a setup problem, not a batch failure) with a message naming the
    directory the EMR image should have and how to pin the jar instead.
    ``lookup`` resolves a format name (Spark's ``DataSource.lookupDataSource``
    by default) and raises when it cannot.
    """
    resolve = lookup if lookup is not None else _jvm_lookup(spark)
    try:
        resolve(FORMAT)
    except Exception as exc:
        raise ConfigError(
            f"source.format: {FORMAT!r} does not resolve on this node ({_first_line(exc)}); "
            f"expected the awslabs spark-sql-kinesis connector jar under {CONNECTOR_DIR} "
            "(on EMR's default spark.driver/executor.extraClassPath). Check the release "
            "ships it (ls that directory on a node) or pin the connector jar instead: add "
            "it with its SHA-256 to bootstrap/jars.lock and to the construct's "
            "jar_artifacts, so install_jars.sh puts it in /opt/streaming/jars "
            "(docs/deploy.md, 'Pinned jars')"
        ) from exc


def _jvm_lookup(spark: SparkSession) -> Callable[[str], object]:
    def lookup(name: str) -> object:
        # py4j gateway: Spark has no public Python API for a format lookup.
        jvm = spark.sparkContext._jvm
        conf = spark._jsparkSession.sessionState().conf()
        assert jvm is not None
        return jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            name, conf
        )

    return lookup


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
