"""infra/sizing.py: the instance sizes (one place sets consistent defaults,
an explicit field still wins, the node types are ones EMR supports on the
release, and ``small`` holds its trigger at 500 records/s by docs/sizing.md's
measured batch cost) and the executors from EC2 instance types (one container
left for the driver, memory after YARN's share and Spark's overhead)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from emr.releases import DEFAULT_RELEASE_LABEL
from infra.config import InstanceConfig, InstanceConfigError, load_instances
from infra.constructs.emr_cluster import cluster_configurations
from infra.sizing import (
    INSTANCE_TYPES,
    SIZES,
    SMALL_RECORDS_PER_SEC,
    batch_seconds,
    holds_trigger,
    size_executors,
)

TLS = "s3://my-tls-bucket/streaming/certificates.zip"


def _one(**entry: Any) -> Any:
    context = {
        "streaming": {
            "defaults": {"emr": {"tls_certificates_s3_uri": TLS}},
            "instances": [{"domain": "refunds", "region": "us-east-1", **entry}],
        }
    }
    (config,) = load_instances(context)
    return config


def test_small_sets_graviton_nodes_one_core_two_core_executors_default_metrics_30s() -> None:
    config = _one(size="small")
    assert (config.emr.master_instance_type, config.emr.core_instance_type) == (
        "m7g.xlarge",
        "m7g.xlarge",
    )
    assert (config.emr.core_instance_count, config.emr.executor_cores) == (1, 2)
    assert config.kafka.enhanced_monitoring == "DEFAULT"
    assert config.job.trigger_interval_sec == 30


def test_an_explicit_field_wins_over_the_size() -> None:
    config = _one(size="small", job={"trigger_interval_sec": 60}, emr={"core_instance_count": 2})
    assert config.job.trigger_interval_sec == 60 and config.emr.core_instance_count == 2
    assert config.emr.core_instance_type == "m7g.xlarge", "the rest of the size still applies"


def test_control_without_a_size_the_defaults_are_unchanged() -> None:
    config = _one()
    assert config.size is None
    assert (config.emr.core_instance_type, config.emr.core_instance_count) == ("m5.xlarge", 2)
    assert config.kafka.enhanced_monitoring == "PER_BROKER"
    assert config.job.trigger_interval_sec == 10


def test_an_unknown_size_is_named_with_the_allowed_ones() -> None:
    with pytest.raises(
        InstanceConfigError, match=r"field size: .*'tiny'.*small \| medium \| large"
    ):
        _one(size="tiny")


@pytest.mark.parametrize("size", sorted(SIZES))
def test_each_size_leaves_a_container_for_the_driver(size: str) -> None:
    emr = _one(size=size).emr
    sizing = size_executors(emr.core_instance_type, emr.core_instance_count, emr.executor_cores)
    vcpus = {"m7g.xlarge": 4, "m7g.2xlarge": 8}[emr.core_instance_type]
    slots = emr.core_instance_count * (vcpus // sizing.cores)
    assert sizing.instances == slots - 1 >= 1


@mock_aws
def test_every_node_type_of_every_size_is_supported_by_emr_on_the_release() -> None:
    """moto answers ListSupportedInstanceTypes from its copy of EMR's answer
    for the release label (moto/emr/resources/instance-types-<label>.json.gz)."""
    emr = boto3.client("emr", region_name="us-east-1")
    supported: set[str] = set()
    kwargs: dict[str, str] = {"ReleaseLabel": DEFAULT_RELEASE_LABEL}
    while True:
        page = emr.list_supported_instance_types(**kwargs)
        supported |= {t["Type"] for t in page["SupportedInstanceTypes"]}
        if not page.get("Marker"):
            break
        kwargs["Marker"] = page["Marker"]
    assert "m5.xlarge" in supported, "control: the release's list is there"
    for size in SIZES.values():
        for field in ("master_instance_type", "core_instance_type"):
            assert size["emr"][field] in supported, (size, field)
    assert "m7g.large" not in supported, "why the sizes start at xlarge"


def test_small_keeps_its_trigger_at_500_records_per_second() -> None:
    """docs/sizing.md: T(r x I) = F + r x I / (c x p), F ~ 6 s, p ~ 6,500."""
    config = _one(size="small")
    cores = size_executors(
        config.emr.core_instance_type, config.emr.core_instance_count, config.emr.executor_cores
    )
    executor_cores = cores.instances * cores.cores
    trigger = config.job.trigger_interval_sec
    assert executor_cores == 2
    assert batch_seconds(SMALL_RECORDS_PER_SEC, trigger, executor_cores) == pytest.approx(
        6 + 500 * 30 / (2 * 6_500)
    )
    assert holds_trigger(SMALL_RECORDS_PER_SEC, trigger, executor_cores)
    # Controls: the model does say no: a trigger no longer than F = 6 s, or
    # 20,000 records/s (the two cores' 13,000 a second over 24 s of work).
    assert not holds_trigger(SMALL_RECORDS_PER_SEC, 6, executor_cores)
    assert not holds_trigger(20_000, trigger, executor_cores)


# ------------------------------------------------ shuffle partitions


def _sized(**entry: Any) -> InstanceConfig:
    base = {"domain": "orders", "region": "eu-west-1"}
    base["emr"] = {"tls_certificates_s3_uri": "s3://certs-bucket/orders.zip"}
    (config,) = load_instances({"streaming": {"instances": [{**base, **entry}]}})
    return config


def test_the_shuffle_partitions_follow_the_sizing_until_the_instance_is_deployed() -> None:
    large = _sized(emr={"tls_certificates_s3_uri": "s3://certs-bucket/orders.zip",
                        "core_instance_type": "m5.2xlarge", "core_instance_count": 3})  # fmt: skip
    small = _sized(size="small")
    assert large.shuffle_partitions == 20  # 5 executors x 4 cores
    assert small.shuffle_partitions != large.shuffle_partitions


def test_the_recorded_count_is_kept_across_a_new_size() -> None:
    """The checkpoint keeps the count it was created with: a new size changes
    the executors, and the spark-defaults keep the recorded partitions."""
    small = _sized(size="small", deployed={"shuffle_partitions": 20})
    assert small.shuffle_partitions == 20
    (defaults, *_rest) = cluster_configurations(small.emr, small.shuffle_partitions)
    properties = defaults["configurationProperties"]
    assert properties["spark.sql.shuffle.partitions"] == "20"
    assert properties["spark.executor.cores"] == "2"
    (unpinned, *_rest) = cluster_configurations(small.emr)
    assert unpinned["configurationProperties"]["spark.sql.shuffle.partitions"] != "20"


def test_a_small_instance_starts_its_state_in_one_partition_on_either_target() -> None:
    """Each stateful partition reads and writes its own checkpoint files every
    batch; a light shape needs one (infra/sizing.py STATE_PARTITIONS)."""
    assert _sized(size="small").shuffle_partitions == 1
    assert _sized(size="small", compute="serverless").shuffle_partitions == 1
    medium = _sized(size="medium")
    assert (
        medium.shuffle_partitions
        == size_executors(
            medium.emr.core_instance_type, medium.emr.core_instance_count, medium.emr.executor_cores
        ).shuffle_partitions
    ), "no size value: one per executor core"
    assert _sized(size="small", state_partitions=3).shuffle_partitions == 3, "explicit wins"


def test_a_deployed_checkpoint_keeps_its_count_and_a_different_one_is_refused() -> None:
    assert _sized(size="small", deployed={"shuffle_partitions": 2}).shuffle_partitions == 2
    assert _sized(state_partitions=2, deployed={"shuffle_partitions": 2}).shuffle_partitions == 2
    with pytest.raises(InstanceConfigError) as refused:
        _sized(size="small", state_partitions=1, deployed={"shuffle_partitions": 2})
    (line,) = str(refused.value).splitlines()
    assert "state_partitions" in line and "deployed.shuffle_partitions" in line
    assert "migrate-checkpoint" in line


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
