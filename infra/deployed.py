"""Changes CloudFormation cannot apply to a deployed instance, refused at synth.

Synth runs offline (no credentials, no lookups), so it cannot ask AWS what an
instance's stack holds. The instance's ``deployed`` section in cdk.json says
it instead, as ``table_definition_sha256`` pins the events table's definition
(infra/table_definition.py): the values the live stack was last
deployed with. It is written by hand after a deploy, reviewed with the rest of
cdk.json, and ``make preflight`` compares it with the deployed stack's
template (scripts/preflight/stack.py), so a stale or missing record is found
before it lets a bad change through. An instance without the section (never
deployed) is never refused: there is nothing to collide with.

The rules are pure functions of two values; :class:`infra.config.InstanceConfig`
calls them and reports the field, the value and the way through.
"""

from __future__ import annotations

from typing import Final

# UpdateShardCount, which CloudFormation calls for a changed ShardCount of a
# provisioned stream, cannot scale up to more than double the open shards nor
# down below half of them in one call
# (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_UpdateShardCount.html).
UPDATE_SHARD_COUNT_PAGE: Final = (
    "https://docs.aws.amazon.com/kinesis/latest/APIReference/API_UpdateShardCount.html"
)
# AWS::MSK::Topic: ReplicationFactor (like TopicName) is "Update requires:
# Replacement"; CloudFormation creates the replacement before it deletes the
# old resource, and the new topic has the old one's name
# (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-msk-topic.html,
# https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-updating-stacks-update-behaviors.html).
MSK_TOPIC_PAGE: Final = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/"
    "aws-resource-msk-topic.html"
)
DOCS_SECTION: Final = 'docs/infra.md, "Changes synth refuses"'


def shard_range(deployed: int) -> tuple[int, int]:
    """The shard counts one UpdateShardCount call can reach from ``deployed``:
    at least half (rounded up), at most double."""
    return (deployed + 1) // 2, deployed * 2


def shard_steps(deployed: int, wanted: int) -> list[int]:
    """The counts to deploy one after another to go from ``deployed`` to
    ``wanted``, each within one call's range of the one before; the last is
    ``wanted``."""
    steps: list[int] = []
    current = deployed
    while current != wanted:
        low, high = shard_range(current)
        current = min(high, wanted) if wanted > current else max(low, wanted)
        steps.append(current)
    return steps


def _shards(count: int) -> str:
    return f"{count} shard" if count == 1 else f"{count} shards"


def shard_count_problem(deployed: int, wanted: int) -> str | None:
    """None when a provisioned stream deployed with ``deployed`` shards can be
    updated to ``wanted`` in one deploy; else what is allowed and the way
    through (the deploys in between)."""
    low, high = shard_range(deployed)
    if low <= wanted <= high:
        return None
    steps = shard_steps(deployed, wanted)
    plan = ", then ".join(str(step) for step in steps)
    return (
        f"{low}..{high} in one deploy: the stream is deployed with {_shards(deployed)} "
        f"(deployed.shard_count) and UpdateShardCount scales at most to double or half "
        f"the open shards per call ({UPDATE_SHARD_COUNT_PAGE}). Way through: deploy "
        f"stream.shard_count {plan}, one deploy each, setting deployed.shard_count to "
        f"each value once its deploy completed ({DOCS_SECTION})"
    )


def replication_factor_problem(deployed: int, wanted: int, topic: str) -> str | None:
    """None when the failure topic keeps its replication factor; else what is
    allowed and the way through. Any change replaces the topic under the same
    name, so the create half of create-before-delete fails on the live topic."""
    if wanted == deployed:
        return None
    return (
        f"{deployed} (deployed.topic_replication_factor): the failure topic {topic} is "
        f"deployed with {deployed} replicas, and a new ReplicationFactor replaces the "
        "AWS::MSK::Topic under the same name, so CloudFormation's create-before-delete "
        f"collides with the live topic ({MSK_TOPIC_PAGE}). Way through: keep {deployed}, or "
        "stop the job, drain the topic (make reprocess), delete the topic outside "
        "CloudFormation, deploy the new factor and set deployed.topic_replication_factor "
        f"to it ({DOCS_SECTION})"
    )
