"""infra/sizing.py: executors from EC2 instance types (one container left
for the driver, memory after YARN's share and Spark's overhead)."""

from __future__ import annotations

import pytest

from infra.sizing import INSTANCE_TYPES, size_executors


def test_three_m5_2xlarge_nodes_hold_five_4_core_executors_and_the_driver() -> None:
    sizing = size_executors("m5.2xlarge", 3)
    # 8 vCPUs / 4 cores = 2 containers a node, 6 in all, one for the driver.
    assert (sizing.instances, sizing.cores) == (5, 4)
    # 32 GiB x 0.75 / 2 containers = 12,288 MB, less the 10 % overhead, in 256 MB steps.
    assert sizing.memory_mb == 11_008
    assert sizing.memory_mb % 256 == 0


def test_one_small_node_with_2_core_executors_holds_one_executor_and_the_driver() -> None:
    sizing = size_executors("m7g.xlarge", 1, executor_cores=2)
    assert (sizing.instances, sizing.cores) == (1, 2)


def test_executor_cores_never_exceed_a_nodes_vcpus_and_one_executor_always_runs() -> None:
    sizing = size_executors("m5.xlarge", 1, executor_cores=16)
    assert sizing.cores == INSTANCE_TYPES["m5.xlarge"][0]
    assert sizing.instances == 1  # one slot: never zero executors


@pytest.mark.parametrize(
    ("instance_type", "count", "message"),
    [
        ("t3.micro", 1, "core_instance_type='t3.micro' is not sized; allowed: c5.2xlarge"),
        ("m5.xlarge", 0, "core_instance_count=0 must be >= 1"),
    ],
)
def test_bad_input_names_the_field(instance_type: str, count: int, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(")):
        size_executors(instance_type, count)
