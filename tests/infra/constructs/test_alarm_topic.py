"""infra/constructs/alarm_topic.py alone in a bare stack: the encrypted topic
and its key take CloudWatch only for the instance's alarms and EventBridge only
for its EMR failure rule (the confused-deputy guard), the rule forwards the
cluster's failure states, and its name fits EventBridge's 64 characters."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from infra.constructs.alarm_topic import (
    EMR_FAILURE_STATES,
    MAX_RULE_NAME,
    AlarmTopic,
    AlarmTopicProps,
    emr_failure_rule_name,
)


def _template() -> dict[str, Any]:
    stack = cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region="eu-west-1"))
    props = AlarmTopicProps(
        name_prefix="Streaming-orders-eu-west-1",
        instance_id="orders-eu-west-1",
        emails=("ops@example.com",),
        alarm_names=("Lag", "Failures"),
        cluster_id="j-123",
        removal_policy=cdk.RemovalPolicy.RETAIN,
    )
    AlarmTopic(stack, "Alarms", props=props)
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


def _one(template: dict[str, Any], kind: str) -> dict[str, Any]:
    (found,) = [r for r in template["Resources"].values() if r["Type"] == kind]
    return found


def _by_sid(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in statements if "Sid" in s}


def _sources(statement: dict[str, Any]) -> str:
    return str(statement["Condition"]["ArnEquals"]["aws:SourceArn"])


def test_a_long_prefix_shortens_the_rule_name_and_a_longer_one_is_refused() -> None:
    assert emr_failure_rule_name("Streaming-orders") == "Streaming-orders-EmrFailures"
    assert emr_failure_rule_name("x" * 55) == "x" * 55 + "-Emr"
    with pytest.raises(ValueError, match=f"at most {MAX_RULE_NAME}"):
        emr_failure_rule_name("x" * 61)


def test_the_key_and_the_topic_serve_the_instances_alarms_and_rule_only() -> None:
    template = _template()
    key = _by_sid(_one(template, "AWS::KMS::Key")["Properties"]["KeyPolicy"]["Statement"])
    topic = _by_sid(
        _one(template, "AWS::SNS::TopicPolicy")["Properties"]["PolicyDocument"]["Statement"]
    )
    for statement in (key["AlarmsUseTopicKey"], topic["AlarmsPublish"]):
        assert statement["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
        assert "alarm:Streaming-orders-eu-west-1-Lag" in _sources(statement)
        assert "alarm:Streaming-orders-eu-west-1-Failures" in _sources(statement)
        assert "aws:SourceAccount" in statement["Condition"]["StringEquals"]
    rule_key = key["EmrFailureRuleUsesTopicKey"]
    assert "rule/Streaming-orders-eu-west-1-EmrFailures" in _sources(rule_key)
    assert topic["EmrFailureRulePublishes"]["Principal"] == {"Service": "events.amazonaws.com"}
    assert _one(template, "AWS::KMS::Key")["Properties"]["EnableKeyRotation"] is True


def test_the_rule_forwards_the_clusters_failures_and_mail_is_subscribed() -> None:
    template = _template()
    rule = _one(template, "AWS::Events::Rule")["Properties"]
    assert rule["Name"] == "Streaming-orders-eu-west-1-EmrFailures"
    assert rule["EventPattern"]["detail"] == {
        "clusterId": ["j-123"],
        "state": list(EMR_FAILURE_STATES),
    }
    subscription = _one(template, "AWS::SNS::Subscription")["Properties"]
    assert (subscription["Protocol"], subscription["Endpoint"]) == ("email", "ops@example.com")
    assert set(template["Outputs"]) == {"AlarmTopicArn"}
