"""Executor sizing from EC2 instance types: infrastructure knowledge.

The job only needs an :class:`~model.spark_conf.ExecutorSizing`; which instance
types exist, how many vCPUs and GiB they have and how YARN splits a node are
facts about the cluster, so they live here, beside the construct that picks
the instance types.
"""

from __future__ import annotations

from typing import Final

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
