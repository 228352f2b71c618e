"""One failure-record size for the producer and the topic, checked at synth,
and the claim-check store's grant: PutObject under ``failures/`` of the
instance's own data bucket, nothing else there."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from infra.config import InstanceConfigError, load_instances
from infra.constructs import failure_topic
from infra.constructs.buckets import DATA_BUCKET_LOGICAL_ID, FAILURES_PREFIX
from infra.stacks.application import build_app
from model.failure_limits import RECORD_BATCH_ALLOWANCE, FailureLimits, FailureLimitsError
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.synth

ALL = (
    "Streaming-orders-ap-northeast-2",
    "Streaming-payments-ap-northeast-2",
    "Streaming-orders-eu-west-1",
)


def _topic_configs(synthesized: Synthesized, name: str) -> dict[str, str]:
    topic = synthesized.templates[name]["Resources"]["FailureTopic"]["Properties"]
    lines = base64.b64decode(topic["Configs"]).decode().splitlines()
    return dict(line.split("=", 1) for line in lines)


@pytest.mark.parametrize("name", ALL)
def test_the_producer_and_the_topic_take_one_setting(synthesized: Synthesized, name: str) -> None:
    config = synthesized.config(name)
    job = synthesized.stacks[name].job_config
    topic_max = int(_topic_configs(synthesized, name)["max.message.bytes"])
    assert job.kafka.max_message_bytes == config.kafka.max_message_bytes == 1_000_000
    assert topic_max == FailureLimits(config.kafka.max_message_bytes).topic_max_message_bytes
    assert topic_max == job.kafka.max_message_bytes + RECORD_BATCH_ALLOWANCE == 1_048_588


@pytest.mark.parametrize("name", ALL)
def test_the_job_puts_originals_under_failures_of_its_data_bucket(
    synthesized: Synthesized, name: str
) -> None:
    config = synthesized.config(name)
    location = synthesized.stacks[name].job_config.failure_store_location
    resolved = synthesized.stacks[name].resolve(location)
    assert resolved == {
        "Fn::Join": [
            "",
            ["s3://", {"Ref": DATA_BUCKET_LOGICAL_ID}, f"/failures/{config.instance_id}/"],
        ]
    }


def _job_statements(synthesized: Synthesized, name: str) -> list[dict[str, Any]]:
    job_role = synthesized.role_assumed_by(name, "ec2.amazonaws.com")
    return synthesized.policy_statements(name, job_role)


def _resources(statement: dict[str, Any]) -> list[Any]:
    found = statement["Resource"]
    return found if isinstance(found, list) else [found]


@pytest.mark.parametrize("name", ALL)
def test_the_job_may_only_put_objects_under_the_failure_prefix(
    synthesized: Synthesized, name: str
) -> None:
    prefix_arn = {
        "Fn::Join": ["", [{"Fn::GetAtt": [DATA_BUCKET_LOGICAL_ID, "Arn"]}, f"/{FAILURES_PREFIX}*"]]
    }
    touching = [s for s in _job_statements(synthesized, name) if prefix_arn in _resources(s)]
    assert touching == [
        {
            "Action": "s3:PutObject",
            "Effect": "Allow",
            "Resource": prefix_arn,
            "Sid": "ClaimCheckPut",
        }
    ]
    text = str(_job_statements(synthesized, name))
    assert "failures/" not in text.replace(f"/{FAILURES_PREFIX}*", ""), (
        "no other statement names the failure prefix"
    )


def _context_with(kafka: dict[str, Any], example_context: dict[str, Any]) -> dict[str, Any]:
    context = copy.deepcopy(example_context)
    context["streaming"]["instances"][0].setdefault("kafka", {}).update(kafka)
    return context


@pytest.mark.parametrize("value", [1_000, 2_000_000])
def test_a_size_out_of_range_stops_synth_naming_the_field(
    value: int, example_context: dict[str, Any]
) -> None:
    with pytest.raises(InstanceConfigError, match=r"kafka\.max_message_bytes: bad value") as caught:
        load_instances(_context_with({"max_message_bytes": value}, example_context))
    assert isinstance(caught.value, ValueError)


def test_a_topic_below_the_producer_stops_synth_naming_the_field(
    example_context: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = failure_topic.topic_configs

    def drifted(config: Any) -> dict[str, str]:
        return {**real(config), "max.message.bytes": str(config.max_message_bytes)}

    monkeypatch.setattr(failure_topic, "topic_configs", drifted)
    first = load_instances(example_context)[0]
    with pytest.raises(FailureLimitsError, match=rf"{first.instance_id}: kafka\.max_message_bytes"):
        build_app(example_context)
