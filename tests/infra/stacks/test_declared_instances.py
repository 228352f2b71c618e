"""The user's own instances: every instance the repository's ``cdk.json``
declares, however many and whatever their names, synthesizes clean.

A user's first edit is to ``cdk.json`` (their domains, their regions), so
these checks are parametrized over what the file holds, read at collection:
cdk-nag with no unacknowledged finding, cfn-lint with no error or warning,
the stack named by the contract with its stateful logical IDs pinned, and
isolation: no IAM statement of an instance grants anything of any other
declared instance, role by role, nor lets it publish in another's metric
namespace (the matcher of tests/infra/stacks/test_isolation.py). Tests of a known
shape (a named instance, three instances) use the example of
tests/fixtures/cdk.json instead; tests/infra/stacks/test_edited_cdk_json.py runs
this file on a copy with an instance added and one removed.
"""

from __future__ import annotations

from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from model import contract
from model.contract import metric_namespace
from tests.infra.conftest import Synthesized, declared_stack_names
from tests.infra.stacks.test_isolation import (
    _allows_namespace,
    allowed_statements,
    instance_targets,
    job_role,
    metric_writers,
    optimizer_roles,
    reachable,
    role_statements,
)

pytestmark = pytest.mark.synth

DECLARED = declared_stack_names()
# Stateful resources whose logical IDs must never change.
PINNED = {
    "EventsStream": "AWS::Kinesis::Stream",
    "DataBucket": "AWS::S3::Bucket",
    "ArtifactsBucket": "AWS::S3::Bucket",
    "AccessLogsBucket": "AWS::S3::Bucket",
    "GlueDatabase": "AWS::Glue::Database",
    "FailureTopic": "AWS::MSK::Topic",
}


def _violations(report: dict[str, Any] | None) -> list[str]:
    if report is None:
        return []
    return [
        f"{v['severity']} {v['ruleName']} at {c['constructPath']}"
        for plugin in report["pluginReports"]
        for v in plugin["violations"]
        for c in v["violatingConstructs"]
    ]


def _others(synth: Synthesized, owner: str) -> list[str]:
    return [name for name in synth.stacks if name != owner]


def test_every_declared_instance_passes_cdk_nag(
    synthesized_declared: Synthesized,
) -> None:
    assert list(synthesized_declared.templates) == DECLARED
    assert _violations(synthesized_declared.report) == []
    assert synthesized_declared.error is None
    # CDK writes the report only when a validation plugin is registered; a clean
    # run lists no plugin reports (tests/infra/stacks/test_nag_and_lint.py has the control).
    assert synthesized_declared.report is not None
    assert synthesized_declared.report["pluginReports"] == []


@pytest.mark.parametrize("name", DECLARED)
def test_cfn_lint_reports_no_errors_or_warnings(
    synthesized_declared: Synthesized, name: str
) -> None:
    path = synthesized_declared.template_paths[name]
    region = synthesized_declared.config(name).region
    matches = lint_file(path, config=ManualArgs(regions=[region]))
    found = [f"{m.rule.id} {m.message} ({m.path})" for m in matches if m.rule.id[0] in "EFW"]
    assert found == []


@pytest.mark.parametrize("name", DECLARED)
def test_stack_is_named_by_the_contract_in_its_region(
    synthesized_declared: Synthesized, name: str
) -> None:
    stack = synthesized_declared.stacks[name]
    assert name == contract.stack_name(stack.config.domain, stack.config.region)
    assert stack.region == stack.config.region


@pytest.mark.parametrize("name", DECLARED)
def test_stateful_logical_ids_are_pinned(synthesized_declared: Synthesized, name: str) -> None:
    """A refactor of the construct tree must not replace a stateful resource
    (CloudFormation replaces a resource whose logical ID changes)."""
    resources = synthesized_declared.templates[name]["Resources"]
    for logical_id, type_ in PINNED.items():
        assert logical_id in resources, f"{name}: {logical_id} missing"
        assert resources[logical_id]["Type"] == type_
    for type_ in set(PINNED.values()):
        pinned = {lid for lid, t in PINNED.items() if t == type_}
        actual = {lid for lid, r in resources.items() if r["Type"] == type_}
        assert actual == pinned, f"{name}: unpinned {type_}: {sorted(actual - pinned)}"


@pytest.mark.parametrize("owner", DECLARED)
def test_no_statement_or_role_grants_another_instances_resources(
    synthesized_declared: Synthesized, owner: str
) -> None:
    """Against each other declared instance: all of the owner's statements
    together, then the job role and each table optimizer role on its own."""
    synth = synthesized_declared
    statements = allowed_statements(synth, owner)
    by_role = role_statements(synth, owner)
    roles = [job_role(synth, owner), *optimizer_roles(synth, owner).values()]
    leaks = {}
    for neighbour in _others(synth, owner):
        targets = instance_targets(synth, neighbour, as_seen_from=owner)
        leaks[neighbour] = reachable(statements, targets)
        for role in roles:
            leaks[f"{neighbour} by {role}"] = reachable(by_role[role], targets)
    assert {where: hits for where, hits in leaks.items() if hits} == {}


@pytest.mark.parametrize("owner", DECLARED)
def test_control_the_matcher_finds_the_instances_own_resources(
    synthesized_declared: Synthesized, owner: str
) -> None:
    """The same matcher does see the owner's grants on its own resources, so
    an empty result above is not a matcher that never matches."""
    synth = synthesized_declared
    targets = instance_targets(synth, owner, as_seen_from=owner)
    hits = reachable(allowed_statements(synth, owner), targets)
    expected = {t.what for t in targets} - {"another table"}
    if synth.config(owner).job.source.consumer_type != "SubscribeToShard":
        expected.discard("stream consumer")  # no consumer ARN without enhanced fan-out
    assert set(hits) == expected


@pytest.mark.parametrize("owner", DECLARED)
def test_no_statement_puts_metrics_in_another_instances_namespace(
    synthesized_declared: Synthesized, owner: str
) -> None:
    synth = synthesized_declared
    writers = metric_writers(synth, owner)
    assert writers, "control: the job role does publish metrics"
    own = metric_namespace(synth.config(owner).instance_id)
    assert all(_allows_namespace(s, own) for s in writers)
    for neighbour in _others(synth, owner):
        theirs = metric_namespace(synth.config(neighbour).instance_id)
        assert own != theirs
        assert not [s for s in writers if _allows_namespace(s, theirs)], neighbour
