"""infra/constructs/stream.py: the instance's Kinesis stream alone in a bare
stack (the synthesized stacks: tests/infra/stacks/test_templates.py)."""

from __future__ import annotations

import json
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from infra.config_sections import StreamConfig
from infra.constructs.stream import STREAM_LOGICAL_ID, EventStream, EventStreamProps
from model.config import ConsumerType


def _bare_stream(
    config: StreamConfig, consumer_type: ConsumerType = "GetRecords"
) -> dict[str, Any]:
    """The stream construct and a role it grants, in a bare stack, as a template."""
    app = cdk.App()
    stack = cdk.Stack(app, "Bare", env=cdk.Environment(region="eu-west-1"))
    stream = EventStream(
        stack,
        "Stream",
        props=EventStreamProps("unit-events", config, cdk.RemovalPolicy.RETAIN),
    )
    role = iam.Role(stack, "Job", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    stream.grant_job(role, consumer_type=consumer_type)
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


def _statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        statement
        for resource in template["Resources"].values()
        if resource["Type"] == "AWS::IAM::Policy"
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_a_provisioned_stream_is_encrypted_sized_and_pinned() -> None:
    template = _bare_stream(StreamConfig(shard_count=3, retention_hours=48))
    stream = template["Resources"][STREAM_LOGICAL_ID]
    assert stream["Type"] == "AWS::Kinesis::Stream"
    assert stream["DeletionPolicy"] == "Retain"
    props = stream["Properties"]
    assert props["Name"] == "unit-events"
    assert props["ShardCount"] == 3
    assert props["RetentionPeriodHours"] == 48
    assert props["StreamModeDetails"] == {"StreamMode": "PROVISIONED"}
    assert props["StreamEncryption"] == {"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"}


def test_no_shard_count_means_on_demand() -> None:
    props = _bare_stream(StreamConfig())["Resources"][STREAM_LOGICAL_ID]["Properties"]
    assert props["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
    assert "ShardCount" not in props


CONSUMERS = {"Fn::Join": ["", [{"Fn::GetAtt": [STREAM_LOGICAL_ID, "Arn"]}, "/consumer/*"]]}


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return set(action) if isinstance(action, list) else {action}


@pytest.mark.parametrize("consumer_type", ["GetRecords", "SubscribeToShard"])
def test_only_enhanced_fan_out_registers_consumers_and_reaches_them(
    consumer_type: ConsumerType,
) -> None:
    """CDK's grant_read covers the stream itself; enhanced fan-out adds
    RegisterStreamConsumer on the stream and the consumers of this stream only."""
    statements = _statements(_bare_stream(StreamConfig(shard_count=1), consumer_type))
    actions = set().union(*(_actions(s) for s in statements))
    assert {"kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards"} <= actions
    on_consumers = [s for s in statements if s["Resource"] == CONSUMERS]
    if consumer_type == "SubscribeToShard":
        assert "kinesis:RegisterStreamConsumer" in actions
        assert [_actions(s) for s in on_consumers] == [
            {"kinesis:DescribeStreamConsumer", "kinesis:SubscribeToShard"}
        ]
    else:
        assert "kinesis:RegisterStreamConsumer" not in actions
        assert on_consumers == []
    assert not {"kinesis:DeregisterStreamConsumer", "kinesis:ListStreamConsumers"} & actions


def _with_consumer(name: str | None) -> dict[str, Any]:
    app = cdk.App()
    stack = cdk.Stack(app, "Bare", env=cdk.Environment(region="eu-west-1"))
    props = EventStreamProps(
        "unit-events", StreamConfig(shard_count=1), cdk.RemovalPolicy.RETAIN, name
    )
    EventStream(stack, "Stream", props=props)
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


def test_the_stack_owns_the_fan_out_consumer_and_deletes_it_with_the_stack() -> None:
    """``AWS::Kinesis::StreamConsumer`` on the stream, deleted
    with the stack even when the instance retains its stream (a consumer holds
    no data and bills while registered); none without enhanced fan-out."""
    template = _with_consumer("unit-job")
    [consumer] = [r for r in template["Resources"].values()
                  if r["Type"] == "AWS::Kinesis::StreamConsumer"]  # fmt: skip
    assert consumer["Properties"] == {
        "ConsumerName": "unit-job",
        "StreamARN": {"Fn::GetAtt": [STREAM_LOGICAL_ID, "Arn"]},
    }
    assert consumer["DeletionPolicy"] == "Delete"
    assert template["Resources"][STREAM_LOGICAL_ID]["DeletionPolicy"] == "Retain"
    outputs = json.dumps(template["Outputs"])
    assert "ConsumerARN" in outputs
    none = _with_consumer(None)
    assert not [r for r in none["Resources"].values()
                if r["Type"] == "AWS::Kinesis::StreamConsumer"]  # fmt: skip


def test_the_jobs_config_carries_the_stacks_consumer(synthesized: Any) -> None:
    """In the synthesized EFO instance, the job's ``source.consumer_arn`` is
    the ConsumerARN of the stack's one consumer: the job uses it, registers none."""
    stack = synthesized.stacks["Streaming-payments-ap-northeast-2"]
    [(logical_id, consumer)] = synthesized.resources(
        "Streaming-payments-ap-northeast-2", "AWS::Kinesis::StreamConsumer"
    ).items()
    assert consumer["Properties"]["ConsumerName"] == "payments-ap-northeast-2-job"
    resolved = stack.resolve(stack.job_config.source.consumer_arn)
    assert resolved == {"Fn::GetAtt": [logical_id, "ConsumerARN"]}
    polling = synthesized.stacks["Streaming-orders-ap-northeast-2"]
    assert polling.job_config.source.consumer_arn is None
    resources = synthesized.templates["Streaming-orders-ap-northeast-2"]["Resources"]
    assert "AWS::Kinesis::StreamConsumer" not in {r["Type"] for r in resources.values()}
