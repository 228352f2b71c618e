"""infra/config_sections.py: each section's defaults, bounds and own rules
(stream, emr, alarms, network, kafka), reached through an instance declaration."""

from __future__ import annotations

from typing import Any

import pytest

from infra.config import load_instances
from infra.config_sections import DEFAULT_KAFKA_VERSION, KAFKA_END_OF_SUPPORT
from tests.infra.config_cases import (
    assert_bad_value,
    assert_refused,
    context_of,
    entry_error,
    existing_network,
    instance_entry,
)


@pytest.mark.parametrize(
    ("section", "field", "value", "allowed"),
    [
        ("stream", "shard_count", 0, "an integer >= 1, or null"),
        ("stream", "shard_count", -3, "an integer >= 1, or null"),
        ("stream", "shard_count", "4", "an integer"),
        ("alarms", "iterator_age_ms", 0, "an integer > 0"),
        ("alarms", "end_to_end_latency_ms", -1, "an integer > 0"),
        ("alarms", "scheduling_delay_ratio", 0, "a number > 0"),
        ("alarms", "scheduling_delay_ratio", 1.5, "0 < ratio <= 1"),
        ("alarms", "failure_records", 0, "an integer > 0"),
        ("alarms", "heartbeat_missing_periods", 0, "an integer > 0"),
        ("job", "trigger_interval_sec", 0, "an integer > 0"),
        ("kafka", "version", "3.5.1", "an MSK Kafka version >= 3.6"),
        ("kafka", "topic_replication_factor", 4, "<= kafka.broker_count (3)"),
        ("supervisor", "backoff_max_sec", 30, ">= supervisor.backoff_sec (60)"),
    ],
)
def test_a_bad_value_names_the_field_the_value_and_what_is_allowed(
    section: str, field: str, value: Any, allowed: str
) -> None:
    assert_bad_value(section, field, value, allowed)


@pytest.mark.parametrize(
    ("overrides", "parts"),
    [
        pytest.param(
            {"network": {"vpc_id": "vpc-0123456789abcdef0"}},
            ["field network.private_subnet_ids", "at least 2 private subnet ids"],
            id="an existing VPC needs subnets and zones",
        ),
        pytest.param(
            {
                "network": {"availability_zones": ["eu-west-1a", "eu-west-1b"]},
                "kafka": {"broker_count": 3},
            },
            ["field kafka.broker_count: bad value 3; allowed: a multiple of the 2 client subnets"],
            id="the broker count must fill the client subnets",
        ),
    ],
)
def test_a_rule_on_several_fields_names_the_one_it_blames(
    overrides: dict[str, Any], parts: list[str]
) -> None:
    assert_refused(overrides, *parts)


def test_the_job_python_defaults_to_the_releases_first_and_must_be_one_it_ships() -> None:
    config = load_instances(context_of(instance_entry()))[0]
    assert config.emr.job_python == "/usr/bin/python3.11"
    chosen = load_instances(context_of(instance_entry(emr={"python": "/usr/bin/python3.13"})))[0]
    assert chosen.emr.job_python == "/usr/bin/python3.13"
    # Listed for emr-spark-8.0.0, not for 8.1.0.
    message = entry_error(emr={"python": "/usr/bin/python3.12"})
    assert "field emr.python: bad value '/usr/bin/python3.12'" in message
    assert "allowed: a Python that emr-spark-8.1.0 ships: /usr/bin/python3.11, " in message


@pytest.mark.parametrize("min_insync", [3, 4])
def test_min_insync_replicas_must_stay_below_the_replication_factor(min_insync: int) -> None:
    """min.insync.replicas >= RF would block every acks=all write when one replica is down."""
    assert_refused(
        {"kafka": {"topic_min_insync_replicas": min_insync}},
        f"field kafka.topic_min_insync_replicas: bad value {min_insync}; "
        "allowed: < kafka.topic_replication_factor (3)",
    )


def test_min_insync_replicas_is_checked_for_an_existing_cluster_too() -> None:
    arn = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"
    kafka = {"cluster_arn": arn, "topic_replication_factor": 2, "topic_min_insync_replicas": 2}
    assert_refused({"kafka": kafka}, "field kafka.topic_min_insync_replicas: bad value 2")


def test_durability_stays_configurable() -> None:
    kafka = {"broker_count": 6, "topic_replication_factor": 4, "topic_min_insync_replicas": 3}
    (config,) = load_instances(context_of(instance_entry(kafka=kafka)))
    assert (config.kafka.topic_replication_factor, config.kafka.min_insync_replicas) == (4, 3)


def test_existing_vpc_is_accepted_with_subnets() -> None:
    network = existing_network("eu-west-1")
    (config,) = load_instances(context_of(instance_entry(network=network)))
    assert config.network.private_subnet_ids == tuple(network["private_subnet_ids"])


def test_kafka_cluster_settings_are_ignored_with_an_existing_cluster() -> None:
    arn = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"
    (config,) = load_instances(
        context_of(
            instance_entry(kafka={"cluster_arn": arn, "version": "2.8.1", "broker_count": 3})
        )
    )
    assert config.kafka.cluster_arn == arn


def test_a_created_cluster_defaults_to_a_kafka_version_with_no_end_of_support() -> None:
    """Item 6: 3.6.0 ends 2026-06-01 and MSK phases out new clusters on it;
    3.8.x (MSK's recommended) has no published date."""
    (config,) = load_instances(context_of(instance_entry()))
    assert config.kafka.version == DEFAULT_KAFKA_VERSION == "3.8.x"
    assert DEFAULT_KAFKA_VERSION not in KAFKA_END_OF_SUPPORT
    message = entry_error(kafka={"version": "3.6.0"})
    assert "field kafka.version: bad value '3.6.0'; allowed: a version with no published end" in (
        message
    )
    assert "3.6.0's ends 2026-06-01" in message
    for version in ("3.7.x", "3.9.x", "4.0.x"):
        assert load_instances(context_of(instance_entry(kafka={"version": version})))[
            0
        ].kafka.version
