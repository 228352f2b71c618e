"""Pinned logical IDs: a refactor of the construct tree must not replace a
stateful resource (CloudFormation replaces a resource whose logical ID changes)."""

from __future__ import annotations

import pytest

from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.synth

PINNED = {
    "EventsStream": "AWS::Kinesis::Stream",
    "DataBucket": "AWS::S3::Bucket",
    "ArtifactsBucket": "AWS::S3::Bucket",
    "AccessLogsBucket": "AWS::S3::Bucket",
    "GlueDatabase": "AWS::Glue::Database",
    "FailureTopic": "AWS::MSK::Topic",
}


def test_stateful_logical_ids_are_pinned(synthesized: Synthesized) -> None:
    for name, template in synthesized.templates.items():
        resources = template["Resources"]
        for logical_id, type_ in PINNED.items():
            assert logical_id in resources, f"{name}: {logical_id} missing"
            assert resources[logical_id]["Type"] == type_
        for type_ in set(PINNED.values()):
            pinned = {lid for lid, t in PINNED.items() if t == type_}
            actual = {lid for lid, r in resources.items() if r["Type"] == type_}
            assert actual == pinned, f"{name}: unpinned {type_}: {sorted(actual - pinned)}"
