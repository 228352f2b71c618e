"""``make change-check`` on the edits users make to ``cdk.json``, replayed
against the example of a Region's shared stack with two instances on it
(tests/fixtures/cdk_serverless.json: ``light`` on EMR Serverless, ``orders``
on EMR, both on ``Streaming-shared-us-east-1``).

Each edit is synthesized as the deploy would (the whole app, or the subset a
``-c streaming:instances=`` deploy builds) and checked against today's
templates with CloudFormation's rules (infra/template_changes.py): none of
them may remove or change an export that a deployed stack imports
(https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/intrinsic-function-reference-importvalue.html),
or replace a stateful resource. A replaced shared VPC is still refused.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.config import read_cdk_context
from infra.template_changes import exports, imports, refused_changes
from scripts import change_check
from tests.fixtures import SERVERLESS_CDK_JSON

pytestmark = pytest.mark.synth

SHARED = "Streaming-shared-us-east-1"
Context = dict[str, Any]


def _instances(context: Context) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = context["streaming"]["instances"]
    return found


def _named(context: Context, domain: str) -> dict[str, Any]:
    return next(entry for entry in _instances(context) if entry["domain"] == domain)


def added(context: Context) -> None:
    _instances(context).append({**copy.deepcopy(_named(context, "light")), "domain": "clicks"})


def removed(context: Context) -> None:
    context["streaming"]["instances"] = [_named(context, "light")]


def moved_the_regions_last_away(context: Context) -> None:
    """Both leave us-east-1: the one left moves to eu-west-1 on a network of its own."""
    light = _named(context, "light")
    light.update(region="eu-west-1", network={"shared": False}, kafka={"shared": False})
    context["streaming"]["instances"] = [light]


def resized(context: Context) -> None:
    _named(context, "light")["size"] = "medium"


def compute_switched(context: Context) -> None:
    _named(context, "orders")["compute"] = "serverless"


def unshared(context: Context) -> None:
    _named(context, "light").update(network={"shared": False}, kafka={"shared": False})


EDITS: dict[str, tuple[Callable[[Context], None], str | None]] = {
    "add an instance, deploy it alone": (added, "clicks-us-east-1"),
    "remove an instance": (removed, None),
    "move the region's last instances away": (moved_the_regions_last_away, None),
    "change an instance's size": (resized, "light-us-east-1"),
    "switch an instance's compute": (compute_switched, "orders-us-east-1"),
    "switch an instance off the shared network and cluster": (unshared, None),
    "deploy the shared stack alone": (lambda context: None, "shared-us-east-1"),
}


@pytest.fixture(scope="module")
def deployed() -> dict[str, Any]:
    return change_check.synthesized(read_cdk_context(SERVERLESS_CDK_JSON))


@pytest.mark.parametrize("edit", list(EDITS))
def test_no_documented_edit_is_refused(deployed: dict[str, Any], edit: str) -> None:
    change, selection = EDITS[edit]
    context = copy.deepcopy(dict(read_cdk_context(SERVERLESS_CDK_JSON)))
    change(context)
    after = change_check.synthesized(context, selection)
    assert SHARED in deployed and after, "the deploy updates a stack"
    refusals = [refusal.line() for refusal in refused_changes(deployed, after)]
    assert refusals == []


def test_the_shared_stack_alone_keeps_every_export_an_instance_imports(
    deployed: dict[str, Any],
) -> None:
    """The kept exports: whatever the synth builds, the shared stack exports
    what either kind of instance imports, under the same names."""
    context = dict(read_cdk_context(SERVERLESS_CDK_JSON))
    alone = change_check.synthesized(context, "shared-us-east-1")
    imported = set().union(
        *(imports(template) for name, template in deployed.items() if name != SHARED)
    )
    assert imported, "the instances import the shared stack's ids"
    assert imported <= set(exports(alone[SHARED]))


def test_a_replaced_shared_vpc_is_refused_by_the_command(
    deployed: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tmp_path / "before.json"
    before.write_text(SERVERLESS_CDK_JSON.read_text(encoding="utf-8"), encoding="utf-8")
    raw = json.loads(before.read_text(encoding="utf-8"))
    raw["context"]["streaming"]["shared"][0]["network"] = {"vpc_cidr": "10.77.0.0/16"}
    after = tmp_path / "after.json"
    after.write_text(json.dumps(raw), encoding="utf-8")
    code = change_check.main(
        ["--before", str(before), "--after", str(after), "--instances", "shared-us-east-1"]
    )
    out = capsys.readouterr().out
    assert code == change_check.EXIT_REFUSED, out
    assert f"refused: {SHARED}: AWS::EC2::VPC " in out
    assert "its value changes while a deployed stack imports it" in out
