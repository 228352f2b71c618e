"""Isolation: two instances in the same account and region; no statement in
instance A's IAM policies grants any of instance B's stream, buckets,
database, events table (its catalog entry, its files, its optimizers) or
failure topic, and each of A's roles (the job role and the three table
optimizer roles) is checked on its own as well.

Policy documents are parsed, not grepped: every ``Resource`` is rendered to an
ARN pattern (intrinsics resolved: pseudo parameters to the shared account and
region, references to resources of A's own template to opaque ``<A:...>``
tokens that no other stack can produce) and matched, IAM-style (``*`` and
``?`` wildcards), against B's resource ARNs, for the statements whose actions
belong to that resource's service.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest

from model.contract import EVENTS_TABLE, metric_namespace
from tests.infra.conftest import Synthesized, glue_arn

pytestmark = pytest.mark.synth

ACCOUNT = "123456789012"
A = "Streaming-orders-ap-northeast-2"
B = "Streaming-payments-ap-northeast-2"


@dataclass(frozen=True)
class Target:
    what: str
    arn: str
    services: frozenset[str]


def render(value: Any, stack: str, region: str) -> str:
    """One ``Resource`` value as an ARN pattern string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        ((fn, arg),) = value.items()
        pseudo = {
            "AWS::Partition": "aws",
            "AWS::Region": region,
            "AWS::AccountId": ACCOUNT,
            "AWS::URLSuffix": "amazonaws.com",
        }
        if fn == "Ref":
            return pseudo.get(arg, f"<{stack}:{arg}>")
        if fn == "Fn::Sub" and isinstance(arg, str):
            # CDK's asset bucket name: only pseudo parameters may appear in it.
            return re.sub(r"\$\{([^}]+)\}", lambda m: pseudo.get(m[1], f"<{stack}:{m[1]}>"), arg)
        if fn == "Fn::GetAtt":
            return f"<{stack}:{arg[0]}.{arg[1]}>"
        if fn == "Fn::ImportValue":
            # An export of the Region's shared stack (its cluster's ARN): the
            # same opaque value in every instance that imports it.
            return f"<import:{arg}>"
        if fn == "Fn::GetStackOutput":
            # The same through a cross-stack output (the shared stack's cluster).
            return f"<import:{arg['StackName']}:{arg['OutputName']}>"
        if fn == "Fn::Join":
            separator, parts = arg
            return str(separator).join(render(part, stack, region) for part in parts)
    raise AssertionError(f"{stack}: unsupported intrinsic in a policy resource: {value!r}")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def grants(pattern: str, arn: str) -> bool:
    """IAM resource matching: ``*`` any run of characters, ``?`` one character."""
    regex = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, arn) is not None


Statements = list[tuple[list[str], list[str]]]


def policy_documents(synth: Synthesized, stack: str) -> list[tuple[str, dict[str, Any]]]:
    """(role logical ID, policy document) of every inline, standalone and
    managed policy of the stack's roles."""
    documents: list[tuple[str, dict[str, Any]]] = []
    for logical_id, resource in synth.templates[stack]["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            # A policy attached otherwise (ManagedPolicyArns, users) still counts.
            attached = [role["Ref"] for role in props.get("Roles", [])] or [logical_id]
            documents.extend((role, props["PolicyDocument"]) for role in attached)
        elif resource["Type"] == "AWS::IAM::Role":
            documents.extend((logical_id, p["PolicyDocument"]) for p in props.get("Policies", []))
    return documents


def role_statements(synth: Synthesized, stack: str) -> dict[str, Statements]:
    """(actions, rendered resources) of every Allow statement, by the logical
    ID of the role it is attached to (inline, standalone and managed policies)."""
    region = synth.config(stack).region
    found: dict[str, Statements] = {}
    for role, document in policy_documents(synth, stack):
        for statement in document["Statement"]:
            if statement["Effect"] != "Allow":
                continue
            assert "NotResource" not in statement and "NotAction" not in statement
            found.setdefault(role, []).append(
                (
                    [str(a) for a in _as_list(statement["Action"])],
                    [render(r, stack, region) for r in _as_list(statement["Resource"])],
                )
            )
    assert found
    return found


def allowed_statements(synth: Synthesized, stack: str) -> Statements:
    """Every role's statements together."""
    return [s for statements in role_statements(synth, stack).values() for s in statements]


def optimizer_roles(synth: Synthesized, stack: str) -> dict[str, str]:
    """Optimizer type -> the logical ID of the role it runs as."""
    return {
        r["Properties"]["Type"]: r["Properties"]["TableOptimizerConfiguration"]["RoleArn"][
            "Fn::GetAtt"
        ][0]
        for r in synth.templates[stack]["Resources"].values()
        if r["Type"] == "AWS::Glue::TableOptimizer"
    }


def job_role(synth: Synthesized, stack: str) -> str:
    """The role the job runs as: the EMR nodes' (EC2), or the EMR Serverless
    execution role of a ``"compute": "serverless"`` instance."""
    serverless = synth.config(stack).compute == "serverless"
    service = "emr-serverless.amazonaws.com" if serverless else "ec2.amazonaws.com"
    return synth.role_assumed_by(stack, service)


GLUE = frozenset({"glue"})


def instance_targets(synth: Synthesized, stack: str, *, as_seen_from: str) -> list[Target]:
    """The resources of ``stack`` as ARNs. Seen from the stack itself, its own
    resources are its tokens; seen from another stack, a bucket is only knowable
    by its CloudFormation-generated name (``<stack>-<logicalid>-<suffix>``)."""
    config = synth.config(stack)
    region = config.region
    own = stack == as_seen_from
    prefix = f"arn:aws:{{}}:{region}:{ACCOUNT}"
    kinesis = frozenset({"kinesis"})

    def bucket(logical_id: str) -> str:
        if own:
            return f"<{stack}:{logical_id}.Arn>"
        return f"arn:aws:s3:::{stack.lower()}-{logical_id.lower()}-1a2b3c4d5e6f"

    stream = (
        f"<{stack}:EventsStream.Arn>"
        if own
        else f"{prefix.format('kinesis')}:stream/{config.stream_name}"
    )
    topic = (
        f"<{stack}:FailureTopic.TopicArn>"
        if own
        else f"{prefix.format('kafka')}:topic/{stack}/0b1c2d3e-1111/{config.failure_topic_name}"
    )
    glue = prefix.format("glue")
    s3 = frozenset({"s3"})
    table_files = f"{bucket('DataBucket')}/warehouse/{config.database_name}.db/{EVENTS_TABLE}"
    return [
        Target("stream", stream, kinesis),
        Target("stream consumer", f"{stream}/consumer/job:1700000000", kinesis),
        Target("data bucket", bucket("DataBucket"), s3),
        Target("checkpoint object", f"{bucket('DataBucket')}/checkpoints/offsets/1", s3),
        Target("warehouse object", f"{bucket('DataBucket')}/warehouse/x.db/events/part-0", s3),
        Target("events data file", f"{table_files}/data/occurred_at_day=2026-01-01/0.parquet", s3),
        Target("events metadata file", f"{table_files}/metadata/00001-a.metadata.json", s3),
        Target("artifact object", f"{bucket('ArtifactsBucket')}/artifacts/job/abc/app.zip", s3),
        Target("database", f"{glue}:database/{config.database_name}", frozenset({"glue"})),
        # Table optimizers are managed through their table's ARN
        # (glue:*TableOptimizer authorizes on catalog, database and table).
        Target("events table", f"{glue}:table/{config.database_name}/{EVENTS_TABLE}", GLUE),
        Target("another table", f"{glue}:table/{config.database_name}/other", GLUE),
        Target("failure topic", topic, frozenset({"kafka-cluster"})),
    ]


# What only the job role reaches of its own instance (the optimizer roles get
# the events table and its files, nothing else).
JOB_ONLY = {
    "stream",
    "stream consumer",
    "checkpoint object",
    "warehouse object",
    "artifact object",
    "failure topic",
}


def reachable(statements: Statements, targets: list[Target]) -> dict[str, list[str]]:
    hits: dict[str, list[str]] = {}
    for actions, resources in statements:
        services = {a.split(":", 1)[0] for a in actions if a != "*"} | (
            {"*"} if "*" in actions else set()
        )
        for target in targets:
            if not (services & target.services or "*" in services):
                continue
            for pattern in resources:
                if grants(pattern, target.arn):
                    hits.setdefault(target.what, []).append(f"{actions} on {pattern}")
    return hits


def test_the_two_instances_share_account_and_region(synthesized: Synthesized) -> None:
    a, b = synthesized.stacks[A], synthesized.stacks[B]
    assert a.config.region == b.config.region
    assert a.config.account == b.config.account
    assert a.config.domain != b.config.domain


@pytest.mark.parametrize("owner", [A, B])
def test_control_each_role_does_reach_its_own_resources(
    synthesized: Synthesized, owner: str
) -> None:
    statements = allowed_statements(synthesized, owner)
    targets = instance_targets(synthesized, owner, as_seen_from=owner)
    hits = reachable(statements, targets)
    expected = {t.what for t in targets} - {"another table"}
    if synthesized.config(owner).job.source.consumer_type != "SubscribeToShard":
        # Without enhanced fan-out no consumer ARN is granted (only the stream).
        expected.discard("stream consumer")
    assert set(hits) == expected


@pytest.mark.parametrize(("owner", "neighbour"), [(A, B), (B, A)])
def test_no_role_alone_reaches_the_neighbour(
    synthesized: Synthesized, owner: str, neighbour: str
) -> None:
    """Role by role: the job role and each optimizer role of A, none of B."""
    by_role = role_statements(synthesized, owner)
    roles = [job_role(synthesized, owner), *optimizer_roles(synthesized, owner).values()]
    assert len(roles) == 4
    targets = instance_targets(synthesized, neighbour, as_seen_from=owner)
    for role in roles:
        assert reachable(by_role[role], targets) == {}, role


@pytest.mark.parametrize("owner", [A, B])
def test_control_optimizer_roles_reach_their_table_and_nothing_else(
    synthesized: Synthesized, owner: str
) -> None:
    roles = optimizer_roles(synthesized, owner)
    assert set(roles) == {"compaction", "retention", "orphan_file_deletion"}
    by_role = role_statements(synthesized, owner)
    targets = instance_targets(synthesized, owner, as_seen_from=owner)
    for kind, role in roles.items():
        hits = reachable(by_role[role], targets)
        assert set(hits) == {
            "events table",
            "events data file",
            "events metadata file",
            "database",
            # s3:ListBucket, narrowed by an s3:prefix condition to the table's
            # prefix (this matcher ignores conditions; test_events_table.py checks it).
            "data bucket",
        }, kind
        assert not set(hits) & JOB_ONLY


@pytest.mark.parametrize("owner", [A, B])
def test_no_role_manages_table_optimizers_or_passes_roles(
    synthesized: Synthesized, owner: str
) -> None:
    """The optimizers are the stack's: no role of the instance may create,
    change or delete one (its own or a neighbour's), nor pass an optimizer role."""
    optimizer_role_arns = {
        f"<{owner}:{role}.Arn>" for role in optimizer_roles(synthesized, owner).values()
    }
    assert len(optimizer_role_arns) == 3  # compaction, retention, orphan-file deletion
    statements = allowed_statements(synthesized, owner)
    assert len(statements) > 10, statements
    for actions, _ in statements:
        for action in actions:
            assert "TableOptimizer" not in action, action
            assert action not in ("glue:*", "*"), action
    passed = [resources for actions, resources in statements if "iam:PassRole" in actions]
    # One statement passes a role: the job's, to the service that runs it.
    assert passed == [[f"<{owner}:{job_role(synthesized, owner)}.Arn>"]], passed
    for resources in passed:
        assert not set(resources) & optimizer_role_arns
        assert all(r.startswith(f"<{owner}:") for r in resources), resources


def test_control_a_wildcard_statement_would_be_caught(synthesized: Synthesized) -> None:
    targets = instance_targets(synthesized, B, as_seen_from=A)
    leaky = [
        (
            ["kinesis:GetRecords"],
            ["arn:aws:kinesis:ap-northeast-2:123456789012:stream/streaming-*"],
        ),
        (["s3:GetObject"], ["arn:aws:s3:::streaming-*/*"]),
        (["glue:GetTable"], ["arn:aws:glue:ap-northeast-2:123456789012:table/*"]),
        (["kafka-cluster:WriteData"], ["*"]),
    ]
    assert set(reachable(leaky, targets)) == {
        "stream",
        "stream consumer",
        "checkpoint object",
        "warehouse object",
        "events data file",
        "events metadata file",
        "artifact object",
        "events table",
        "another table",
        "failure topic",
    }


def test_render_resolves_joins_and_pseudo_parameters() -> None:
    rendered = render(glue_arn(":table/db/*"), A, "ap-northeast-2")
    assert rendered == f"arn:aws:glue:ap-northeast-2:{ACCOUNT}:table/db/*"
    assert grants(rendered, f"arn:aws:glue:ap-northeast-2:{ACCOUNT}:table/db/events")
    assert not grants(rendered, f"arn:aws:glue:ap-northeast-2:{ACCOUNT}:table/db2/events")


# ---------------------------------------------------------------- metrics
# cloudwatch:PutMetricData has no resources: the namespace condition is its
# only scope, so the matcher above (resources) cannot see it. Each instance
# publishes in a namespace of its own; a statement must not let A write B's.


def _allows_namespace(statement: dict[str, Any], namespace: str) -> bool:
    """Whether an Allow statement's ``cloudwatch:namespace`` condition admits
    ``namespace`` (no condition on it admits every namespace)."""
    for operator, keys in statement.get("Condition", {}).items():
        for key, values in keys.items():
            if key.lower() != "cloudwatch:namespace":
                continue
            if operator == "StringEquals" and namespace not in _as_list(values):
                return False
            if operator == "StringLike" and not any(
                grants(str(v), namespace) for v in _as_list(values)
            ):
                return False
            if operator not in ("StringEquals", "StringLike"):
                raise AssertionError(f"unexpected operator on cloudwatch:namespace: {operator}")
    return True


def metric_writers(synth: Synthesized, stack: str) -> list[dict[str, Any]]:
    """Every Allow statement of the stack's roles that can put metric data."""
    return [
        statement
        for _, document in policy_documents(synth, stack)
        for statement in document["Statement"]
        if statement["Effect"] == "Allow"
        and {"cloudwatch:PutMetricData", "cloudwatch:*", "*"} & set(_as_list(statement["Action"]))
    ]


@pytest.mark.parametrize(("owner", "neighbour"), [(A, B), (B, A)])
def test_no_statement_puts_metrics_in_the_neighbours_namespace(
    synthesized: Synthesized, owner: str, neighbour: str
) -> None:
    writers = metric_writers(synthesized, owner)
    assert writers, "control: the job role does publish metrics"
    own = metric_namespace(synthesized.config(owner).instance_id)
    theirs = metric_namespace(synthesized.config(neighbour).instance_id)
    assert own != theirs
    assert all(_allows_namespace(s, own) for s in writers)
    assert not [s for s in writers if _allows_namespace(s, theirs)]


def test_control_a_shared_or_wildcard_namespace_would_be_caught() -> None:
    theirs = metric_namespace("payments-ap-northeast-2")
    leaky = [
        {"Effect": "Allow", "Action": "cloudwatch:PutMetricData", "Resource": "*"},
        {
            "Effect": "Allow",
            "Action": "cloudwatch:PutMetricData",
            "Resource": "*",
            "Condition": {"StringLike": {"cloudwatch:namespace": "StreamingPipeline*"}},
        },
        {
            "Effect": "Allow",
            "Action": "cloudwatch:PutMetricData",
            "Resource": "*",
            "Condition": {"StringEquals": {"cloudwatch:namespace": [theirs]}},
        },
    ]
    assert all(_allows_namespace(s, theirs) for s in leaky)
    narrow = {
        "Effect": "Allow",
        "Action": "cloudwatch:PutMetricData",
        "Resource": "*",
        "Condition": {
            "StringEquals": {"cloudwatch:namespace": metric_namespace("orders-ap-northeast-2")}
        },
    }
    assert not _allows_namespace(narrow, theirs)


# --------------------------------------------------------------- EMR Serverless
# The execution role of a serverless instance and an EMR neighbour
# in one region (tests/fixtures/cdk_serverless.json), by the same matcher.

LIGHT = "Streaming-light-us-east-1"
ORDERS = "Streaming-orders-us-east-1"


def execution_role(synth: Synthesized, stack: str) -> str:
    return synth.role_assumed_by(stack, "emr-serverless.amazonaws.com")


def execution_role_reach(
    synth: Synthesized, stack: str
) -> tuple[dict[str, list[str]], list[Target]]:
    """What LIGHT's execution role alone reaches of ``stack``'s resources, and those."""
    by_role = role_statements(synth, LIGHT)
    targets = instance_targets(synth, stack, as_seen_from=LIGHT)
    return reachable(by_role[execution_role(synth, LIGHT)], targets), targets


@pytest.mark.parametrize(
    ("synthesis", "owner", "neighbour"),
    [
        ("synthesized", A, B),
        ("synthesized", B, A),
        ("synthesized_serverless", LIGHT, ORDERS),
        ("synthesized_serverless", ORDERS, LIGHT),
    ],
)
def test_no_statement_grants_the_neighbours_resources(
    request: pytest.FixtureRequest, synthesis: str, owner: str, neighbour: str
) -> None:
    """Two EMR instances, and a serverless instance beside an EMR one."""
    synth: Synthesized = request.getfixturevalue(synthesis)
    statements = allowed_statements(synth, owner)
    targets = instance_targets(synth, neighbour, as_seen_from=owner)
    assert reachable(statements, targets) == {}


def test_control_the_execution_role_reaches_its_own_stream_buckets_database_and_topic(
    synthesized_serverless: Synthesized,
) -> None:
    hits, targets = execution_role_reach(synthesized_serverless, LIGHT)
    # Everything the EMR job role reaches (without enhanced fan-out, no consumer).
    assert set(hits) == {t.what for t in targets} - {"another table", "stream consumer"}


def test_the_execution_role_alone_reaches_nothing_of_the_neighbour(
    synthesized_serverless: Synthesized,
) -> None:
    hits, targets = execution_role_reach(synthesized_serverless, ORDERS)
    assert targets
    assert hits == {}
    # ... and is the only role the service may assume; no EMR roles on serverless.
    trusted = [
        r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        for r in synthesized_serverless.resources(LIGHT, "AWS::IAM::Role").values()
    ]
    assert {"Service": "emr-serverless.amazonaws.com"} in trusted
    assert {"Service": "ec2.amazonaws.com"} not in trusted
    assert {"Service": "elasticmapreduce.amazonaws.com"} not in trusted


def test_the_execution_role_puts_metrics_in_its_own_namespace_only(
    synthesized_serverless: Synthesized,
) -> None:
    role = execution_role(synthesized_serverless, LIGHT)
    writers = [
        statement
        for owner, document in policy_documents(synthesized_serverless, LIGHT)
        if owner == role
        for statement in document["Statement"]
        if "cloudwatch:PutMetricData" in _as_list(statement["Action"])
    ]
    assert writers, "control: the execution role does publish the job's metrics"
    own = metric_namespace(synthesized_serverless.config(LIGHT).instance_id)
    theirs = metric_namespace(synthesized_serverless.config(ORDERS).instance_id)
    assert all(_allows_namespace(s, own) for s in writers)
    assert not [s for s in writers if _allows_namespace(s, theirs)]
