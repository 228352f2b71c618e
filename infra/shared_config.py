"""A region's shared resources: ``streaming.shared`` in ``cdk.json``::

    {"streaming": {"shared": [{"region": "ap-northeast-2"}], "instances": [...]}}

Each entry is one stack, ``Streaming-shared-<region>``
(infra/stacks/shared_stack.py): a VPC with its NAT, and one MSK cluster that
the region's small instances put their failure topics on. An instance joins
it through the import options it already has (``network.vpc_id``,
``private_subnet_ids``, ``availability_zones``, ``kafka.cluster_arn``: the
shared stack's outputs), so it still owns its topic, its stream, its cluster
and its IAM role; what it shares is brokers and a NAT. Why MSK provisioned,
not Serverless: ``AWS::MSK::Topic`` exists for provisioned clusters only
(failure_topic.py), and at small volume Serverless's per-cluster-hour and
per-partition-hour charges exceed three kafka.t3.small brokers (docs/sizing.md,
"Cost").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Self

from pydantic import Field, model_validator

from app.config_kit import ConfigModel, bad_value
from app.contract import STACK_PREFIX
from infra.config import (
    CONTEXT_KEY,
    Account,
    InstanceConfig,
    InstanceConfigError,
    KafkaConfig,
    NetworkConfig,
    Region,
    RemovalPolicyName,
    RetentionConfig,
    check_broker_count,
    validated,
)

SHARED_KEY: Final = "shared"
# In the shipped example's cluster ARNs: synth for a deploy refuses them.
PLACEHOLDER_CLUSTER_MARK: Final = "/example-"


def _shared_kafka() -> KafkaConfig:
    """Three small brokers, one per zone of the created VPC, DEFAULT (free)
    metrics: failure topics carry little, and each instance's topic keeps the
    default replication (3 replicas, 2 in sync for an ``acks=all`` write)."""
    return KafkaConfig(
        broker_instance_type="kafka.t3.small",
        broker_count=3,
        broker_volume_gib=20,
        enhanced_monitoring="DEFAULT",
    )


class SharedRegionConfig(ConfigModel):
    region: Region
    account: Account | None = None
    removal_policy: RemovalPolicyName = "RETAIN"
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    kafka: KafkaConfig = Field(default_factory=_shared_kafka)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)

    @model_validator(mode="after")
    def _creates_both(self) -> Self:
        if self.network.vpc_id is not None:
            raise bad_value(
                self.network.vpc_id, "null: the shared stack creates the VPC", "network", "vpc_id"
            )
        if self.kafka.cluster_arn is not None:
            raise bad_value(
                self.kafka.cluster_arn,
                "null: the shared stack creates the cluster",
                "kafka",
                "cluster_arn",
            )
        check_broker_count(self.kafka.broker_count, self.network, "the cluster")
        return self

    @property
    def stack_name(self) -> str:
        return f"{STACK_PREFIX}-shared-{self.region}"

    @property
    def cluster_name(self) -> str:
        return f"{STACK_PREFIX.lower()}-failures-{self.region}"


def sharing(instance: InstanceConfig, shared: SharedRegionConfig) -> bool:
    """Whether ``instance`` puts its failure topic on ``shared``'s cluster."""
    arn = instance.kafka.cluster_arn or ""
    return instance.region == shared.region and f":cluster/{shared.cluster_name}/" in arn


def load_shared(context: Mapping[str, Any]) -> list[SharedRegionConfig]:
    """Every entry of ``context["streaming"]["shared"]`` (none: an empty list),
    one per region; a bad field is named like an instance's."""
    section = context.get(CONTEXT_KEY)
    declared = section.get(SHARED_KEY, []) if isinstance(section, Mapping) else []
    if not isinstance(declared, list):
        raise InstanceConfigError(f"context.{CONTEXT_KEY}.{SHARED_KEY}: expected a list")
    found: list[SharedRegionConfig] = []
    for index, entry in enumerate(declared):
        region = entry.get("region") if isinstance(entry, Mapping) else entry
        name = f"{SHARED_KEY}[{index}] ({region})"
        config = validated(SharedRegionConfig, entry, name, "<entry>")
        if any(other.region == config.region for other in found):
            raise InstanceConfigError(
                f"{name}: field region: duplicate value {config.region!r}; "
                "allowed: each region once"
            )
        found.append(config)
    return found
