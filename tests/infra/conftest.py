"""Synthesize the instances once per test session: two sets of them.

* ``synthesized``: the example of known shape, ``tests/fixtures/cdk.json``
  (orders and payments in ap-northeast-2, orders in eu-west-1). Tests that
  name an instance, count instances or rely on one's settings use it: a
  user's edit to their ``cdk.json`` must not change what they check.
* ``synthesized_declared``: whatever the repository's ``cdk.json`` declares,
  the user's own instances (tests/infra/stacks/test_declared_instances.py checks each
  of them: cdk-nag, cfn-lint, isolation, pinned logical IDs). When it declares
  exactly the example, the one synthesis serves both.

Synthesis takes tens of seconds; every synth test reads the same templates,
validation report and stack objects from these session fixtures.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from infra.config import (
    SYNTH_CHECK_CONTEXT_KEY,
    InstanceConfig,
    load_instances,
    read_cdk_context,
)
from infra.stacks.application import build_app
from infra.stacks.streaming_stack import StreamingStack
from tests.fixtures import EXAMPLE_CDK_JSON, SERVERLESS_CDK_JSON

REPO_ROOT = Path(__file__).resolve().parents[2]
# The user's instances: what `make synth` and `cdk deploy` build.
DECLARED_CDK_JSON = REPO_ROOT / "cdk.json"
# The example of known shape the tests name instances of (never the user's file).


@dataclass(frozen=True)
class Synthesized:
    stacks: dict[str, StreamingStack]
    templates: dict[str, dict[str, Any]]
    template_paths: dict[str, Path]
    report: dict[str, Any] | None
    error: str | None
    seconds: float

    def config(self, name: str) -> InstanceConfig:
        return self.stacks[name].config

    def resources(self, name: str, type_: str) -> dict[str, dict[str, Any]]:
        found = {
            logical_id: resource
            for logical_id, resource in self.templates[name]["Resources"].items()
            if resource["Type"] == type_
        }
        assert found, f"{name}: no {type_} in the template"
        return found

    def one(self, name: str, type_: str) -> tuple[str, dict[str, Any]]:
        found = self.resources(name, type_)
        assert len(found) == 1, f"{name}: expected one {type_}, got {sorted(found)}"
        return next(iter(found.items()))

    def properties(self, name: str, logical_id: str) -> dict[str, Any]:
        """The ``Properties`` of resource ``logical_id`` in stack ``name``."""
        properties: dict[str, Any] = self.templates[name]["Resources"][logical_id]["Properties"]
        return properties

    def role_assumed_by(self, name: str, service: str) -> str:
        """The logical ID of the one role ``service`` assumes (``ec2.amazonaws.com``:
        the job's, on the cluster's nodes)."""
        (found,) = [
            logical_id
            for logical_id, role in self.resources(name, "AWS::IAM::Role").items()
            if role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
            == {"Service": service}
        ]
        return found

    def policy_statements(self, name: str, role_id: str) -> list[dict[str, Any]]:
        """The statements of every AWS::IAM::Policy attached to ``role_id``."""
        return [
            statement
            for policy in self.resources(name, "AWS::IAM::Policy").values()
            if {"Ref": role_id} in policy["Properties"]["Roles"]
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        ]


def glue_arn(tail: str) -> dict[str, Any]:
    """A Glue ARN as CDK renders ``arn:${Partition}:glue:${Region}:${Account}<tail>``."""
    return {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":glue:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                tail,
            ],
        ]
    }


def check_context(cdk_json: Path) -> dict[str, Any]:
    """A ``cdk.json``'s context, synthesized as a check (a TLS URI may still be
    the placeholder, which a synth meant for deploying refuses;
    infra/stacks/application.py), as ``make synth`` runs it."""
    return {**read_cdk_context(cdk_json), SYNTH_CHECK_CONTEXT_KEY: True}


def declared_stack_names() -> list[str]:
    """The stacks the user's ``cdk.json`` declares, in its order (read at
    collection, to parametrize the checks of each instance)."""
    return [config.stack_name for config in load_instances(read_cdk_context(DECLARED_CDK_JSON))]


@pytest.fixture(scope="session")
def example_context() -> dict[str, Any]:
    """The example of known shape (tests/fixtures/cdk.json)."""
    return check_context(EXAMPLE_CDK_JSON)


@pytest.fixture(scope="session")
def declared_context() -> dict[str, Any]:
    """The user's own instances (the repository's cdk.json)."""
    return check_context(DECLARED_CDK_JSON)


def synthesize(context: dict[str, Any], outdir: Path) -> Synthesized:
    """Build and synthesize; a cdk-nag failure is kept for the tests to report."""
    started = time.monotonic()
    app, stacks = build_app(context, outdir=str(outdir))
    error = None
    try:
        app.synth()
    except RuntimeError as exc:  # policy validation (cdk-nag) failed
        error = str(exc)
    seconds = time.monotonic() - started
    paths = {s.stack_name: outdir / f"{s.artifact_id}.template.json" for s in stacks}
    report_path = outdir / "validation-report.json"
    return Synthesized(
        stacks={s.stack_name: s for s in stacks},
        templates={name: json.loads(p.read_text()) for name, p in paths.items()},
        template_paths=paths,
        report=json.loads(report_path.read_text()) if report_path.exists() else None,
        error=error,
        seconds=seconds,
    )


@pytest.fixture(scope="session")
def synthesized(
    example_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Synthesized:
    return synthesize(example_context, tmp_path_factory.mktemp("cdk.out"))


@pytest.fixture(scope="session")
def synthesized_declared(
    declared_context: dict[str, Any],
    example_context: dict[str, Any],
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Synthesized:
    """Every instance of the user's cdk.json; the example's synthesis when the
    two declare the same (no second synth in an unedited checkout)."""
    if declared_context == example_context:
        found: Synthesized = request.getfixturevalue("synthesized")
        return found
    return synthesize(declared_context, tmp_path_factory.mktemp("cdk.out.declared"))


EXISTING_MSK_ARN = (
    "arn:aws:kafka:eu-west-1:123456789012:cluster/shared-failures/0b1c2d3e-1111-2222-3333-4444"
)
EXISTING_NETWORK = {
    "vpc_id": "vpc-0123456789abcdef0",
    "availability_zones": ["eu-west-1a", "eu-west-1b"],
    "private_subnet_ids": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
}


@pytest.fixture(scope="session")
def synthesized_existing(
    example_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Synthesized:
    """One instance on an existing VPC and an existing MSK cluster (imported
    from ids, no lookups)."""
    context = json.loads(json.dumps(example_context))
    context["streaming"]["instances"] = [
        {
            "domain": "refunds",
            "region": "eu-west-1",
            "account": "123456789012",
            "network": EXISTING_NETWORK,
            "kafka": {"cluster_arn": EXISTING_MSK_ARN, "topic_replication_factor": 3},
        }
    ]
    return synthesize(context, tmp_path_factory.mktemp("cdk.out.existing"))


@pytest.fixture(scope="session")
def synthesized_lake_formation(
    example_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Synthesized:
    """One instance of the example with ``lake_formation_permissions`` on (a
    test context, not the user's cdk.json)."""
    context = json.loads(json.dumps(example_context))
    context["streaming"]["instances"] = [
        {"domain": "orders", "region": "eu-west-1", "lake_formation_permissions": True}
    ]
    return synthesize(context, tmp_path_factory.mktemp("cdk.out.lake_formation"))


@pytest.fixture(scope="session")
def synthesized_serverless(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """tests/fixtures/cdk_serverless.json: light (EMR Serverless) and orders
    (EMR) in us-east-1, on the region's shared stack."""
    context = check_context(SERVERLESS_CDK_JSON)
    return synthesize(context, tmp_path_factory.mktemp("cdk.out.serverless"))
