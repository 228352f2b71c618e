"""Every instance of the shipped example (the repository's
cdk.json as a fresh clone has it, and the test fixtures), the pinned ones
without a ``table_seed`` included, accepts an optional field appended to its
``job.event_fields`` at synth, its Glue table resource byte-identical: the
pin carries what the next additive change needs (infra/table_definition.py,
``pinned_seed_fields``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from infra.table_definition import EVENTS_TABLE_LOGICAL_ID
from model.config import DEFAULT_EVENT_FIELDS
from tests.fixtures import EXAMPLE_CDK_JSON, SCHEMAS_CDK_JSON
from tests.infra.conftest import DECLARED_CDK_JSON, check_context, synthesize

APPENDED = {"name": "channelAdded", "required": False}


def _appended(context: dict[str, Any]) -> dict[str, Any]:
    grown = copy.deepcopy(context)
    for entry in grown["streaming"]["instances"]:
        job = entry.setdefault("job", {})
        fields = job.get("event_fields") or [
            field.model_dump(exclude_defaults=True) for field in DEFAULT_EVENT_FIELDS
        ]
        job["event_fields"] = [*fields, APPENDED]
    return grown


def _tables(context: dict[str, Any], outdir: Path) -> dict[str, str]:
    synthesized = synthesize(context, outdir)
    assert synthesized.error is None, synthesized.error
    return {
        name: json.dumps(template["Resources"][EVENTS_TABLE_LOGICAL_ID], sort_keys=True)
        for name, template in synthesized.templates.items()
    }


@pytest.mark.synth
@pytest.mark.parametrize(
    "cdk_json", [DECLARED_CDK_JSON, EXAMPLE_CDK_JSON, SCHEMAS_CDK_JSON], ids=lambda p: p.name
)
def test_an_appended_optional_field_keeps_every_table_resource_byte_identical(
    cdk_json: Path, tmp_path: Path
) -> None:
    context = check_context(cdk_json)
    pinned = [e for e in context["streaming"]["instances"] if e.get("table_definition_sha256")]
    before = _tables(context, tmp_path / "before")
    after = _tables(_appended(context), tmp_path / "after")
    assert len(before) == len(context["streaming"]["instances"])
    assert after == before
    if cdk_json == SCHEMAS_CDK_JSON:
        assert pinned and all("table_seed" not in e for e in pinned), "a pin without a seed"
