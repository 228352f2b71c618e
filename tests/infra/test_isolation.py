"""Isolation: two instances in the same account and region; no statement in
instance A's IAM policies grants any of instance B's stream, buckets,
database, tables or failure topic.

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

from tests.infra.conftest import Synthesized

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


def allowed_statements(synth: Synthesized, stack: str) -> list[tuple[list[str], list[str]]]:
    """(actions, rendered resources) of every Allow statement in the stack's
    role policies (inline and standalone)."""
    region = synth.config(stack).region
    documents: list[dict[str, Any]] = []
    for resource in synth.templates[stack]["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents.append(props["PolicyDocument"])
        elif resource["Type"] == "AWS::IAM::Role":
            documents.extend(p["PolicyDocument"] for p in props.get("Policies", []))
    found = []
    for document in documents:
        for statement in document["Statement"]:
            if statement["Effect"] != "Allow":
                continue
            assert "NotResource" not in statement and "NotAction" not in statement
            found.append(
                (
                    [str(a) for a in _as_list(statement["Action"])],
                    [render(r, stack, region) for r in _as_list(statement["Resource"])],
                )
            )
    assert found
    return found


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
    return [
        Target("stream", stream, kinesis),
        Target("stream consumer", f"{stream}/consumer/job:1700000000", kinesis),
        Target("data bucket", bucket("DataBucket"), s3),
        Target("checkpoint object", f"{bucket('DataBucket')}/checkpoints/offsets/1", s3),
        Target("warehouse object", f"{bucket('DataBucket')}/warehouse/x.db/events/part-0", s3),
        Target("artifact object", f"{bucket('ArtifactsBucket')}/artifacts/job/abc/app.zip", s3),
        Target("database", f"{glue}:database/{config.database_name}", frozenset({"glue"})),
        Target("table", f"{glue}:table/{config.database_name}/events", frozenset({"glue"})),
        Target("failure topic", topic, frozenset({"kafka-cluster"})),
    ]


def reachable(
    statements: list[tuple[list[str], list[str]]], targets: list[Target]
) -> dict[str, list[str]]:
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


@pytest.mark.parametrize(("owner", "neighbour"), [(A, B), (B, A)])
def test_no_statement_grants_the_neighbours_resources(
    synthesized: Synthesized, owner: str, neighbour: str
) -> None:
    statements = allowed_statements(synthesized, owner)
    targets = instance_targets(synthesized, neighbour, as_seen_from=owner)
    assert reachable(statements, targets) == {}


@pytest.mark.parametrize("owner", [A, B])
def test_control_each_role_does_reach_its_own_resources(
    synthesized: Synthesized, owner: str
) -> None:
    statements = allowed_statements(synthesized, owner)
    targets = instance_targets(synthesized, owner, as_seen_from=owner)
    hits = reachable(statements, targets)
    expected = {t.what for t in targets}
    if synthesized.config(owner).job.source.consumer_type != "SubscribeToShard":
        # Without enhanced fan-out no consumer ARN is granted (only the stream).
        expected.discard("stream consumer")
    assert set(hits) == expected


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
        "artifact object",
        "table",
        "failure topic",
    }


def test_render_resolves_joins_and_pseudo_parameters() -> None:
    value = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":glue:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":table/db/*",
            ],
        ]
    }
    rendered = render(value, A, "ap-northeast-2")
    assert rendered == f"arn:aws:glue:ap-northeast-2:{ACCOUNT}:table/db/*"
    assert grants(rendered, f"arn:aws:glue:ap-northeast-2:{ACCOUNT}:table/db/events")
    assert not grants(rendered, f"arn:aws:glue:ap-northeast-2:{ACCOUNT}:table/db2/events")
