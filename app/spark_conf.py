"""THE Spark configuration: one source for the EMR cluster and the local run.

The EMR ``spark-defaults`` classification (built by ``infra/``) and the local
SparkSession (built by ``app.job``) both come from :func:`streaming_conf`, so
the settings that prevent the production incidents in DESIGN.md cannot drift
apart between what is tested here and what runs on the cluster:

* dynamic allocation and the external shuffle service off (the 7337 fetch
  failures on a streaming job),
* the Hive catalog on (``InMemoryCatalog cannot be cast to HiveExternalCatalog``),
* speculation off (the Kinesis connector does not support it),
* a fixed executor count and shuffle partitions sized to the cores, not 200.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# vCPUs and memory (GiB) of the instance types the product sizes for. An
# instance type outside this table is rejected by the instance config, so an
# executor size is never a guess.
INSTANCE_TYPES: Final[dict[str, tuple[int, int]]] = {
    "m5.xlarge": (4, 16),
    "m5.2xlarge": (8, 32),
    "m5.4xlarge": (16, 64),
    "m6g.xlarge": (4, 16),
    "m6g.2xlarge": (8, 32),
    "m7g.xlarge": (4, 16),
    "m7g.2xlarge": (8, 32),
    "r5.xlarge": (4, 32),
    "r5.2xlarge": (8, 64),
    "c5.2xlarge": (8, 16),
}

# Share of a node's memory that YARN hands to containers (the rest is the OS,
# the NodeManager and EMR's daemons), and the off-heap overhead Spark adds to
# each executor on top of ``spark.executor.memory``.
_YARN_MEMORY_SHARE: Final = 0.75
_MEMORY_OVERHEAD_SHARE: Final = 0.10
_MAX_EXECUTOR_CORES: Final = 4


@dataclass(frozen=True)
class ExecutorSizing:
    instances: int
    cores: int
    memory_mb: int

    @property
    def shuffle_partitions(self) -> int:
        """One shuffle partition per executor core: one wave of tasks per stage."""
        return self.instances * self.cores


def size_executors(core_instance_type: str, core_instance_count: int) -> ExecutorSizing:
    """Fixed executor sizing for a streaming job on ``core_instance_count`` nodes.

    One executor container is left free for the driver, which runs in a YARN
    container in cluster deploy mode.
    """
    if core_instance_type not in INSTANCE_TYPES:
        raise ValueError(
            f"core_instance_type={core_instance_type!r} is not sized; "
            f"allowed: {', '.join(sorted(INSTANCE_TYPES))}"
        )
    if core_instance_count < 1:
        raise ValueError(f"core_instance_count={core_instance_count} must be >= 1")
    vcpus, memory_gib = INSTANCE_TYPES[core_instance_type]
    cores = min(_MAX_EXECUTOR_CORES, vcpus)
    per_node = max(1, vcpus // cores)
    container_mb = int(memory_gib * 1024 * _YARN_MEMORY_SHARE) // per_node
    memory_mb = int(container_mb / (1 + _MEMORY_OVERHEAD_SHARE)) // 256 * 256
    slots = core_instance_count * per_node
    instances = max(1, slots - 1)
    return ExecutorSizing(instances=instances, cores=cores, memory_mb=memory_mb)


def streaming_conf(sizing: ExecutorSizing) -> dict[str, str]:
    """Spark settings every deployment of the job must have, EMR or local."""
    return {
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
        # A long-running job: retry a lost driver a few times, but forget
        # failures older than an hour so a week-old blip does not count.
        "spark.yarn.maxAppAttempts": "4",
        "spark.yarn.am.attemptFailuresValidityInterval": "1h",
        "spark.yarn.executor.failuresValidityInterval": "1h",
        "spark.task.maxFailures": "8",
    }


# Glue Data Catalog as the Hive metastore on EMR (``spark-hive-site``).
GLUE_HIVE_SITE: Final[dict[str, str]] = {
    "hive.metastore.client.factory.class": (
        "com.amazonaws.glue.catalog.metastore.AWSGlueDataCatalogHiveClientFactory"
    ),
}

LOCAL_SIZING: Final = ExecutorSizing(instances=1, cores=2, memory_mb=1024)


def local_conf(work_dir: str) -> dict[str, str]:
    """The same streaming conf, plus what a laptop needs: an embedded Derby
    metastore and a warehouse under ``work_dir`` (never the repo root), no UI."""
    conf = streaming_conf(LOCAL_SIZING)
    conf.update(
        {
            "spark.master": "local[2]",
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
