"""How an instance is sized: the ``size`` presets and the executors its EC2
instance types hold. Infrastructure knowledge, in one place.

Sizes: ``"size": "small" | "medium" | "large"`` in an instance sets
consistent defaults, and any field the instance (or the deployment's
``defaults``) states explicitly still wins (``infra.config`` merges a size
under the declaration). What a size sets: the node types (Graviton: EMR's
ListSupportedInstanceTypes for ``emr-spark-8.1.0`` lists m6g and m7g from
xlarge up, as moto's copy of it,
``moto/emr/resources/instance-types-emr-spark-8.1.0.json.gz``, shows;
tests/infra/test_sizing.py asks it), the core node count and the executor
cores (:func:`size_executors` derives executors and memory from them), the
MSK monitoring level of a created cluster, and the trigger interval.

``small`` is sized for up to ~500 records/s from docs/sizing.md's measured
batch cost ``T(n) = F + n / (c x p)`` (F ~ 6 s under load, p ~ 6,500
records/s per core): one m7g.xlarge core node, one 2-core executor (the other
half of the node holds the driver's container), a 30 s trigger:
T(500 x 30) = 6 + 15,000 / 13,000 = 7.2 s, well inside 30 s
(:func:`holds_trigger`). A longer trigger also means fewer S3 requests and
Glue commits per hour (docs/sizing.md, "Cost").

Executors: the job only needs an :class:`~model.spark_conf.ExecutorSizing`;
which instance types exist, how many vCPUs and GiB they have and how YARN
splits a node are facts about the cluster, so they live here, beside the
construct that picks the instance types.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from model.spark_conf import ExecutorSizing

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


def size_executors(
    core_instance_type: str, core_instance_count: int, executor_cores: int | None = None
) -> ExecutorSizing:
    """Fixed executor sizing for a streaming job on ``core_instance_count`` nodes.

    One executor container is left free for the driver, which runs in a YARN
    container in cluster deploy mode. ``executor_cores`` (default 4) smaller
    than a node's vCPUs splits the node into more containers: one core node
    of 4 vCPUs with 2-core executors holds one executor and the driver.
    """
    if core_instance_type not in INSTANCE_TYPES:
        raise ValueError(
            f"core_instance_type={core_instance_type!r} is not sized; "
            f"allowed: {', '.join(sorted(INSTANCE_TYPES))}"
        )
    if core_instance_count < 1:
        raise ValueError(f"core_instance_count={core_instance_count} must be >= 1")
    vcpus, memory_gib = INSTANCE_TYPES[core_instance_type]
    cores = min(executor_cores or _MAX_EXECUTOR_CORES, vcpus)
    per_node = max(1, vcpus // cores)
    container_mb = int(memory_gib * 1024 * _YARN_MEMORY_SHARE) // per_node
    memory_mb = int(container_mb / (1 + _MEMORY_OVERHEAD_SHARE)) // 256 * 256
    slots = core_instance_count * per_node
    instances = max(1, slots - 1)
    return ExecutorSizing(instances=instances, cores=cores, memory_mb=memory_mb)


SizeName = Literal["small", "medium", "large"]

# The master node is the same in every size: the smallest Graviton type the
# release supports (above).
MASTER_INSTANCE_TYPE: Final = "m7g.xlarge"


def _size(
    core_type: str, core_count: int, trigger_sec: int, monitoring: str, **emr: Any
) -> dict[str, Any]:
    """A size's defaults, in the shape of an instance's declaration."""
    return {
        "emr": {
            "master_instance_type": MASTER_INSTANCE_TYPE,
            "core_instance_type": core_type,
            "core_instance_count": core_count,
            **emr,
        },
        "kafka": {"enhanced_monitoring": monitoring},
        "job": {"trigger_interval_sec": trigger_sec},
    }


# The de-duplication state's partitions a NEW instance of each size starts
# with (``InstanceConfig.shuffle_partitions``; None: one per executor core).
# Every stateful partition writes and reads its own changelog and snapshot
# files in the checkpoint each batch (a chain of S3 requests per partition,
# docs/sizing.md "Requests per batch"), so a light shape runs one: at
# ``small``'s ~500 records/s a batch's state work is a fraction of a core.
# Only a new checkpoint takes it: Spark keeps the count a stateful query was
# started with ("Several configurations are not modifiable after the query
# has run", https://spark.apache.org/docs/latest/streaming/additional-information.html,
# "Miscellaneous Notes"), so ``deployed.shuffle_partitions`` wins.
STATE_PARTITIONS: Final[dict[str, int | None]] = {"small": 1, "medium": None, "large": None}

SIZES: Final[dict[str, dict[str, Any]]] = {
    "small": _size("m7g.xlarge", 1, 30, "DEFAULT", executor_cores=2),
    "medium": _size("m7g.xlarge", 2, 10, "DEFAULT"),
    "large": _size("m7g.2xlarge", 3, 10, "PER_BROKER"),
}

# docs/sizing.md, "How many cores": the fixed cost of a streaming batch under
# load and one core's records per second (the loaded figure).
BATCH_FIXED_SEC: Final = 6.0
RECORDS_PER_CORE_SEC: Final = 6_500.0
SMALL_RECORDS_PER_SEC: Final = 500


def batch_seconds(records_per_sec: float, trigger_sec: float, cores: int) -> float:
    """docs/sizing.md's ``T(r x I) = F + r x I / (c x p)``."""
    return BATCH_FIXED_SEC + records_per_sec * trigger_sec / (cores * RECORDS_PER_CORE_SEC)


def holds_trigger(records_per_sec: float, trigger_sec: float, cores: int) -> bool:
    """A batch of ``trigger_sec`` worth of records ends before the next trigger."""
    return batch_seconds(records_per_sec, trigger_sec, cores) <= trigger_sec
