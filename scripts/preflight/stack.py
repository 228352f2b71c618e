"""Preflight: what the account already holds of the instance's stack.

* **Left behind.** A ``RETAIN`` instance's stream, Glue database, MSK cluster,
  failure topic and log groups outlive ``cdk destroy`` (docs/infra.md,
  "Known limits") and a first create that rolled back, and they have fixed
  names (model/contract.py, the stack's name for the cluster, ``/<stack>/…``
  for the log groups, infra/constructs/logs_key.py). Deploying the instance
  again would create them again under the same names and fail on the first
  one, minutes into the deploy. When the stack does not exist (or holds
  nothing after a rolled-back create), any of them that does is a FAIL naming
  each, with the two ways through: import them into the new stack
  (``cdk import``), or delete them.
* **The deployed record.** When the stack exists, its template holds the
  shard count and the topic's replication factor that synth compares a change
  with (the instance's ``deployed`` section, infra/deployed.py): a record
  that differs is a FAIL, a missing one a WARN.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from infra.config import InstanceConfig
from infra.constructs.failure_topic import TOPIC_LOGICAL_ID
from infra.constructs.stream import STREAM_LOGICAL_ID
from scripts.preflight.result import Clients, Result, error_code, error_text, iam_fix
from scripts.preflight.shared_cluster import failure_cluster_arn

# CloudFormation can bring existing resources under a stack for the types it
# lists (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/resource-import-supported-resources.html);
# the CDK drives it with cdk import
# (https://docs.aws.amazon.com/cdk/v2/guide/ref-cli-cmd-import.html).
IMPORT_TYPES_PAGE: Final = (
    "https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/"
    "resource-import-supported-resources.html"
)
NOT_FOUND_CODES: Final = frozenset({"ResourceNotFoundException", "EntityNotFoundException",
                                    "NotFoundException"})  # fmt: skip
# A stack whose first create rolled back holds nothing: a rollback keeps the
# resources whose DeletionPolicy is Retain, where they interfere with the retry
# (why RetainExceptOnCreate exists:
# https://aws.amazon.com/about-aws/whats-new/2023/07/aws-cloudformation-deletion-policies-dev-test-cycle/),
# and cdk deploy deletes the empty stack before creating it again ("Found
# existing stack … that had previously failed creation. Deleting it before
# attempting to re-create it.", the pinned aws-cdk CLI), so it counts as absent.
GONE_STATUSES: Final = frozenset({"DELETE_COMPLETE", "ROLLBACK_COMPLETE"})


class StackUnreadableError(Exception):
    """DescribeStacks failed for another reason than a missing stack."""


def deployed_stack(config: InstanceConfig, clients: Clients) -> Mapping[str, Any] | None:
    """The instance's stack as DescribeStacks returns it; None when there is none."""
    try:
        stacks = clients["cloudformation"].describe_stacks(StackName=config.stack_name)["Stacks"]
    except Exception as exc:
        if error_code(exc) == "ValidationError" and "does not exist" in str(exc):
            return None
        raise StackUnreadableError(f"DescribeStacks failed: {error_text(exc)}") from exc
    live = [s for s in stacks if s.get("StackStatus") not in GONE_STATUSES]
    return live[0] if live else None


def _absent(exc: Exception) -> bool:
    return error_code(exc) in NOT_FOUND_CODES


# What one probe found: (what exists, the command that deletes it) per resource.
Found = list[tuple[str, str]]


def _stream_left(config: InstanceConfig, clients: Clients) -> Found:
    clients["kinesis"].describe_stream_summary(StreamName=config.stream_name)
    return [
        (
            f"Kinesis stream {config.stream_name}",
            f"aws kinesis delete-stream --stream-name {config.stream_name} "
            f"--region {config.region}",
        )
    ]


def _database_left(config: InstanceConfig, clients: Clients) -> Found:
    clients["glue"].get_database(Name=config.database_name)
    return [
        (
            f"Glue database {config.database_name}",
            f"aws glue delete-database --name {config.database_name} --region {config.region}",
        )
    ]


def _cluster_left(config: InstanceConfig, clients: Clients) -> Found:
    """The MSK cluster the stack created (by its fixed name)."""
    name = config.stack_name
    clusters = clients["kafka"].list_clusters_v2(ClusterNameFilter=name)["ClusterInfoList"]
    found: Found = []
    for cluster in clusters:
        if cluster.get("ClusterName") == name:
            arn = cluster.get("ClusterArn", "?")
            found.append(
                (
                    f"MSK cluster {name} ({arn}, with topic {config.failure_topic_name})",
                    f"aws kafka delete-cluster --cluster-arn {arn} --region {config.region}",
                )
            )
    return found


def _topic_left(config: InstanceConfig, clients: Clients) -> Found:
    """The failure topic the stack created on an imported cluster."""
    arn, topic = failure_cluster_arn(config, clients), config.failure_topic_name
    if arn is None:  # the shared stack is not deployed: no topic on it yet
        return []
    clients["kafka"].describe_topic(ClusterArn=arn, TopicName=topic)
    return [
        (
            f"failure topic {topic} on {arn}",
            f"delete topic {topic} with a Kafka admin client "
            "(kafka-topics.sh --delete) after draining it",
        )
    ]


def _log_groups_left(config: InstanceConfig, clients: Clients) -> Found:
    prefix = f"/{config.stack_name}/"
    groups = clients["logs"].describe_log_groups(logGroupNamePrefix=prefix)["logGroups"]
    return [
        (
            f"log group {group['logGroupName']}",
            f"aws logs delete-log-group --log-group-name {group['logGroupName']} "
            f"--region {config.region}",
        )
        for group in groups
    ]


def left_behind(config: InstanceConfig, clients: Clients) -> tuple[list[str], list[str], list[str]]:
    """What exists of the instance's fixed-name resources: (found, how to delete
    each, what could not be checked). A describe call's not-found answer means
    absent; a list call that fails leaves its resource unchecked."""
    kafka_probe, kafka_label, kafka_absent_ok = (
        (_cluster_left, "MSK cluster", False)
        if config.creates_cluster
        else (_topic_left, "failure topic", True)
    )
    probes: tuple[tuple[Callable[[InstanceConfig, Clients], Found], str, bool], ...] = (
        (_stream_left, "stream", True),
        (_database_left, "Glue database", True),
        (kafka_probe, kafka_label, kafka_absent_ok),
        (_log_groups_left, f"log groups /{config.stack_name}/*", False),
    )
    found: list[str] = []
    delete: list[str] = []
    unchecked: list[str] = []
    for probe, label, absent_ok in probes:
        try:
            pairs = probe(config, clients)
        except Exception as exc:
            if not (absent_ok and _absent(exc)):
                unchecked.append(f"{label} ({error_text(exc)})")
            continue
        found.extend(what for what, _ in pairs)
        delete.extend(how for _, how in pairs)
    return found, delete, unchecked


def check_left_behind(config: InstanceConfig, clients: Clients) -> Result:
    name = "left-behind resources"
    try:
        stack = deployed_stack(config, clients)
    except StackUnreadableError as exc:
        return Result(name, False, str(exc), iam_fix("cloudformation:DescribeStacks"))
    if stack is not None:
        return Result(
            name,
            True,
            f"stack {config.stack_name} exists ({stack.get('StackStatus')}): CloudFormation "
            "owns its resources",
        )
    found, delete, unchecked = left_behind(config, clients)
    not_read = f"; not checked: {', '.join(unchecked)}" if unchecked else ""
    permissions = iam_fix(
        "kinesis:DescribeStreamSummary, glue:GetDatabase, kafka:ListClustersV2, "
        "kafka:DescribeTopic, logs:DescribeLogGroups"
    )
    why = (
        "RETAIN keeps them on cdk destroy"
        if config.removal_policy == "RETAIN"
        else "a delete that did not finish, or made by hand"
    )
    if found:
        return Result(
            name,
            False,
            f"stack {config.stack_name} does not exist but {len(found)} of its fixed-name "
            f"resources do ({why}): {'; '.join(found)}; "
            "a deploy would fail creating them again" + not_read,
            f"keep the data: import them into the stack (npx cdk import {config.stack_name}; "
            f"the types CloudFormation imports: {IMPORT_TYPES_PAGE}); or drop them, data "
            f"included: {' ; '.join(delete)}",
        )
    if unchecked:
        return Result(
            name,
            False,
            f"stack {config.stack_name} does not exist; nothing of it found{not_read}",
            permissions,
        )
    return Result(
        name,
        True,
        f"stack {config.stack_name} does not exist and none of its fixed-name resources do",
    )


def _template(clients: Clients, stack_name: str) -> Mapping[str, Any]:
    body = clients["cloudformation"].get_template(StackName=stack_name)["TemplateBody"]
    parsed = json.loads(body) if isinstance(body, str) else body
    if not isinstance(parsed, Mapping):
        raise ValueError(f"the template of {stack_name} is not a JSON object")
    return parsed


def deployed_values(template: Mapping[str, Any]) -> dict[str, int | None]:
    """The values the ``deployed`` section records, as the stack's template holds
    them (None: the template has no such value, e.g. an on-demand stream). Pure."""
    resources = template.get("Resources", {})
    stream = resources.get(STREAM_LOGICAL_ID, {}).get("Properties", {})
    topic = resources.get(TOPIC_LOGICAL_ID, {}).get("Properties", {})
    shards = stream.get("ShardCount")
    factor = topic.get("ReplicationFactor")
    partitions = None
    # The EMR cluster's Configurations, or an EMR Serverless application's
    # RuntimeConfiguration: the same spark-defaults under other property names.
    holders = {
        "AWS::EMR::Cluster": ("Configurations", "ConfigurationProperties"),
        "AWS::EMRServerless::Application": ("RuntimeConfiguration", "Properties"),
    }
    for resource in resources.values():
        if resource.get("Type") not in holders:
            continue
        listing, properties = holders[resource["Type"]]
        for classification in resource.get("Properties", {}).get(listing, []):
            if classification.get("Classification") == "spark-defaults":
                found = classification.get(properties, {})
                partitions = found.get("spark.sql.shuffle.partitions", partitions)
    return {
        "shard_count": int(shards) if shards is not None else None,
        "topic_replication_factor": int(factor) if factor is not None else None,
        "shuffle_partitions": int(partitions) if partitions is not None else None,
    }


def check_deployed_record(config: InstanceConfig, clients: Clients) -> Result:
    name = "deployed record"
    recorded = config.deployed.model_dump()
    try:
        stack = deployed_stack(config, clients)
    except StackUnreadableError as exc:
        return Result(name, False, str(exc), iam_fix("cloudformation:DescribeStacks"))
    if stack is None:
        if any(value is not None for value in recorded.values()):
            return Result(
                name,
                True,
                f"stack {config.stack_name} does not exist, yet cdk.json's deployed section "
                f"records {recorded}",
                f"remove the deployed section of {config.instance_id} before its first deploy",
                warn=True,
            )
        return Result(name, True, "not deployed: nothing to record")
    try:
        live = deployed_values(_template(clients, config.stack_name))
    except Exception as exc:
        return Result(
            name,
            False,
            f"GetTemplate {config.stack_name} failed: {error_text(exc)}",
            iam_fix("cloudformation:GetTemplate"),
        )
    wrong = {k: v for k, v in live.items() if recorded[k] is not None and recorded[k] != v}
    missing = {k: v for k, v in live.items() if recorded[k] is None and v is not None}
    wanted = json.dumps({k: v for k, v in live.items() if v is not None})
    fix = f'set "deployed": {wanted} in the {config.instance_id} entry of cdk.json'
    if wrong:
        said = ", ".join(
            f"deployed.{k} {recorded[k]} (the stack holds {v})" for k, v in wrong.items()
        )
        return Result(
            name,
            False,
            f"cdk.json records {said}: synth compares changes with the wrong values",
            fix,
        )
    if missing:
        return Result(
            name,
            True,
            f"stack {config.stack_name} holds {wanted}, which cdk.json does not record: synth "
            "cannot refuse a shard or replication change CloudFormation would fail, nor keep "
            "the job's shuffle partitions across a new size",
            fix,
            warn=True,
        )
    return Result(name, True, f"cdk.json records what {config.stack_name} holds ({wanted})")
