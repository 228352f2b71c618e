"""THE Spark configuration: one source for the EMR cluster and the local run.

The EMR ``spark-defaults`` classification (built by ``infra/``) and the local
SparkSession (built by ``job.driver``) both come from :func:`streaming_conf`, so
the settings that prevent the production incidents in docs/design.md cannot drift
apart between what is tested here and what runs on the cluster:

* dynamic allocation and the external shuffle service off (the 7337 fetch
  failures on a streaming job),
* the Hive catalog on (``InMemoryCatalog cannot be cast to HiveExternalCatalog``),
* speculation off (the Kinesis connector does not support it),
* a fixed executor count and shuffle partitions sized to the cores, not 200,
* the de-duplication state in RocksDB with changelog checkpointing: the state
  holds one key per event of the horizon (millions), which the default
  in-memory provider would keep on the JVM heap and snapshot whole every batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from model.jvm import local_jar


@dataclass(frozen=True)
class ExecutorSizing:
    """How many executors of what size the job runs with. Infrastructure derives
    it from the EC2 instance types (``infra.sizing``); the local run uses
    :data:`LOCAL_SIZING`."""

    instances: int
    cores: int
    memory_mb: int
    # ``spark.executor.memoryOverhead`` (MB); None keeps Spark's default
    # (10 %, at least 384 MB). Set where the worker's size is fixed (EMR
    # Serverless, infra/serverless/config.py) so the Python workers fit.
    memory_overhead_mb: int | None = None

    @property
    def shuffle_partitions(self) -> int:
        """One shuffle partition per executor core: one wave of tasks per stage."""
        return self.instances * self.cores


# Spark's "no byte limit" value for an Arrow batch (Scala's Int.MaxValue).
ARROW_UNBOUNDED_BYTES: Final = 2**31 - 1
ROCKSDB_PROVIDER: Final = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def streaming_conf(sizing: ExecutorSizing) -> dict[str, str]:
    """Spark settings every deployment of the job must have, EMR or local."""
    conf = {
        "spark.dynamicAllocation.enabled": "false",
        "spark.shuffle.service.enabled": "false",
        "spark.sql.catalogImplementation": "hive",
        "spark.speculation": "false",
        "spark.executor.instances": str(sizing.instances),
        "spark.executor.cores": str(sizing.cores),
        "spark.executor.memory": f"{sizing.memory_mb}m",
        "spark.sql.shuffle.partitions": str(sizing.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        # Spark 4.1 turns adaptive execution on for stateless streaming queries
        # (Structured Streaming migration guide, "Upgrading from Structured
        # Streaming 4.0 to 4.1"). The job's query is stateful (de-duplication),
        # so this changes nothing today; pinning it off keeps every micro-batch
        # planned as Spark 4.0 planned it, whatever the plan holds, so the
        # one-shuffle count of a batch (tests/job/test_micro_batch.py) stays the
        # count the batch runs with.
        "spark.sql.adaptive.streaming.stateless.enabled": "false",
        # https://spark.apache.org/docs/4.0.0/structured-streaming-programming-guide.html
        # ("RocksDB State Store Implementation", "Changelog Checkpointing").
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        # Counting the state's rows makes RocksDB read a key before each write
        # to know whether it is new (same guide, "RocksDB State Store
        # Implementation", trackTotalNumberOfRows): 3 extra reads per new id
        # for the de-duplication's value and timer writes. The count only
        # fills numRowsTotal in the progress events, which nothing here reads.
        "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
        # The batch's one pass hands every row to Python through Arrow. Below
        # Int.MaxValue, Spark 4.0 sizes the Arrow batch after EVERY row
        # (BatchedPythonArrowInput.writeSizedBatch: ArrowWriter.sizeInBytes
        # walks every vector): 6 % of a 200,000-record batch's executor time.
        # maxRecordsPerBatch (10,000 rows by default) still bounds each batch.
        "spark.sql.execution.arrow.maxBytesPerBatch": str(ARROW_UNBOUNDED_BYTES),
        # A long-running job: retry a lost driver a few times, but forget
        # failures older than an hour so a week-old blip does not count.
        "spark.yarn.maxAppAttempts": "4",
        "spark.yarn.am.attemptFailuresValidityInterval": "1h",
        # Spark 3.5 renamed spark.yarn.executor.failuresValidityInterval
        # (SparkConf.configsWithAlternatives); the old key logs a warning.
        "spark.executor.failuresValidityInterval": "1h",
        "spark.task.maxFailures": "8",
    }
    if sizing.memory_overhead_mb is not None:
        conf["spark.executor.memoryOverhead"] = f"{sizing.memory_overhead_mb}m"
    return conf


# Glue Data Catalog as the Hive metastore on EMR (``spark-hive-site``).
GLUE_HIVE_SITE: Final[dict[str, str]] = {
    "hive.metastore.client.factory.class": (
        "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory"
    ),
}

# Keys that only YARN reads: EMR Serverless runs no YARN; its own retry policy
# restarts a failed streaming run (infra/serverless/job_run.py).
YARN_ONLY_PREFIX: Final = "spark.yarn."


def serverless_conf(
    sizing: ExecutorSizing,
    *,
    driver_cores: int,
    driver_memory_mb: int,
    driver_memory_overhead_mb: int | None = None,
) -> dict[str, str]:
    """The same streaming conf for an EMR Serverless application's
    ``spark-defaults``: the YARN-only keys dropped, the driver sized to its
    worker (heap and, when given, memory overhead), and the Glue Data Catalog
    as the Hive metastore set as a Spark (Hadoop) property, since Serverless
    has no ``spark-hive-site`` classification
    (https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/metastore-config.html).
    Dynamic allocation stays off: Serverless turns it on by default
    (https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/jobs-spark.html)."""
    conf = {
        key: value
        for key, value in streaming_conf(sizing).items()
        if not key.startswith(YARN_ONLY_PREFIX)
    }
    conf["spark.driver.cores"] = str(driver_cores)
    conf["spark.driver.memory"] = f"{driver_memory_mb}m"
    if driver_memory_overhead_mb is not None:
        conf["spark.driver.memoryOverhead"] = f"{driver_memory_overhead_mb}m"
    conf.update({f"spark.hadoop.{key}": value for key, value in GLUE_HIVE_SITE.items()})
    return conf


LOCAL_SIZING: Final = ExecutorSizing(instances=1, cores=2, memory_mb=1024)


def local_conf(work_dir: str) -> dict[str, str]:
    """The same streaming conf, plus what a laptop needs: an embedded Derby
    metastore and a warehouse under ``work_dir`` (never the repo root), no UI,
    and the job's jar (``model.jvm``) as ``make install`` built it (on EMR
    the step's ``--jars`` carries it)."""
    conf = streaming_conf(LOCAL_SIZING)
    conf.update(
        {
            "spark.master": "local[2]",
            "spark.jars": str(local_jar()),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.warehouse.dir": f"{work_dir}/warehouse",
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={work_dir}/derby",
            "javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={work_dir}/metastore_db;create=true"
            ),
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={work_dir}/metastore_db;create=true"
            ),
        }
    )
    return conf
