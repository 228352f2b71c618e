"""A region's shared resources: ``streaming.shared`` in ``cdk.json``::

    {"streaming": {"shared": [{"region": "ap-northeast-2"}], "instances": [...]}}

Each entry is one stack, ``Streaming-shared-<region>``
(infra/stacks/shared_stack.py): a VPC with its NAT, and one MSK cluster that
the region's small instances put their failure topics on. An instance joins
it with ``"network": {"shared": true}`` and ``"kafka": {"shared": true}``:
its stack then references the shared stack's VPC, subnets and cluster ARN
(CloudFormation exports and ``Fn::ImportValue``, which CDK writes for a
reference between two stacks of one Region) and depends on it, so
``cdk deploy`` deploys the shared stack first, and CloudFormation refuses a
shared-stack update that would change an exported id (replace the VPC, a
subnet or the cluster) while an instance imports it, naming the importing
stack ("After another stack imports an output value, you can't delete the
stack that is exporting the output value or modify the exported output
value", https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/intrinsic-function-reference-importvalue.html).
No id is copied into cdk.json, and a copied literal of the shared cluster's
ARN is refused (infra.config). The instance still owns its topic, its stream,
its EMR cluster and its IAM role; what it shares is brokers and a NAT. Why MSK provisioned,
not Serverless: ``AWS::MSK::Topic`` exists for provisioned clusters only
(failure_topic.py), and at small volume Serverless's per-cluster-hour and
per-partition-hour charges exceed three kafka.t3.small brokers (docs/sizing.md,
"Cost").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Self

from pydantic import Field, model_validator

from infra.config import (
    CONTEXT_KEY,
    InstanceConfig,
    InstanceConfigError,
    RemovalPolicyName,
    validated,
)
from infra.config_fields import Account, Region
from infra.config_sections import (
    KafkaConfig,
    NetworkConfig,
    RetentionConfig,
    check_broker_count,
    shared_cluster_name,
)
from model.config_kit import ConfigModel, bad_value
from model.contract import STACK_PREFIX

SHARED_KEY: Final = "shared"


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
        for section, shared in (("network", self.network.shared), ("kafka", self.kafka.shared)):
            if shared:
                raise bad_value(shared, "false: this is the shared stack", section, "shared")
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
        return shared_cluster_name(self.region)


def sharing(instance: InstanceConfig, shared: SharedRegionConfig) -> bool:
    """Whether ``instance`` puts its failure topic on ``shared``'s cluster."""
    return instance.region == shared.region and instance.kafka.shared


def uses_shared(instance: InstanceConfig) -> bool:
    """Whether ``instance`` needs its Region's shared stack (VPC, cluster or both)."""
    return instance.network.shared or instance.kafka.shared


def check_shared_users(instances: list[InstanceConfig], shared: list[SharedRegionConfig]) -> None:
    """Refuse an instance that uses a Region's shared stack none declares, one
    whose account is not the shared stack's (CDK falls back to weak references
    between accounts, https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.ReferenceStrength.html,
    and a weak reference protects nothing), and one that creates its own
    cluster in the shared VPC with a broker count its subnets cannot spread
    evenly; one line per instance."""
    by_region = {config.region: config for config in shared}
    lines: list[str] = []
    for instance in instances:
        if not uses_shared(instance):
            continue
        entry = by_region.get(instance.region)
        if entry is None:
            field = "network.shared" if instance.network.shared else "kafka.shared"
            lines.append(
                f"instance {instance.instance_id}: field {field}: bad value True; allowed: "
                f'false, or declare {{"region": "{instance.region}"}} under '
                f'{CONTEXT_KEY}.{SHARED_KEY} (docs/infra.md, "A region\'s shared stack")'
            )
        elif instance.account != entry.account:
            lines.append(
                f"instance {instance.instance_id}: field account: {instance.account!r} but "
                f"{SHARED_KEY} {instance.region} has {entry.account!r}; allowed: the same account "
                "on both (between two accounts CDK writes weak references, Fn::GetStackOutput, "
                "and CloudFormation no longer refuses a shared-stack update that replaces a VPC "
                "or cluster the instance uses)"
            )
        elif instance.creates_cluster:
            try:
                check_broker_count(
                    instance.kafka.broker_count, entry.network, "the shared VPC's cluster"
                )
            except ValueError as exc:
                lines.append(f"instance {instance.instance_id}: field kafka.broker_count: {exc}")
    if lines:
        raise InstanceConfigError("\n".join(lines))


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
