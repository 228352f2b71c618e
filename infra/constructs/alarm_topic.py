"""Where an instance's alarms go: an SNS topic encrypted with the stack's key
(infra/constructs/logs_key.py), the
e-mail subscriptions, and an EventBridge rule that sends EMR step and cluster
failures there too.

The topic and its key accept CloudWatch only for the instance's alarm ARNs and
EventBridge only for its rule ARN (``aws:SourceArn``, ``aws:SourceAccount``:
the confused-deputy guard,
https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html). Both
ARNs are built from names, so the key policy needs neither the alarms nor the
rule to exist first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import jsii
from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk.interfaces.aws_events import IRuleRef
from constructs import Construct

from infra.constructs.instance import stack_output
from infra.constructs.logs_key import stack_key

EMR_FAILURE_STATES: Final = ("FAILED", "TERMINATED_WITH_ERRORS", "TERMINATED")
# EventBridge rule names are at most 64 characters
# (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html).
MAX_RULE_NAME: Final = 64


def emr_failure_rule_name(name_prefix: str) -> str:
    """The instance's EMR failure rule: ``<stack>-EmrFailures`` (named, so the
    alarm key's policy can name its ARN without waiting for it)."""
    name = f"{name_prefix}-EmrFailures"
    if len(name) > MAX_RULE_NAME:
        name = f"{name_prefix}-Emr"
    if len(name) > MAX_RULE_NAME:
        raise ValueError(
            f"EventBridge rule name {name!r}: {len(name)} characters; allowed: at most "
            f"{MAX_RULE_NAME} (a shorter domain)"
        )
    return name


def _arn(service: str, resource: str) -> str:
    return f"arn:{Aws.PARTITION}:{service}:{Aws.REGION}:{Aws.ACCOUNT_ID}:{resource}"


def _from_own(sources: list[str]) -> dict[str, Any]:
    """Conditions for a service principal acting for these resources of this account only."""
    return {
        "ArnEquals": {"aws:SourceArn": sources},
        "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
    }


@jsii.implements(events.IRuleTarget)
class _UngrantedTopicTarget:
    """The topic as a rule target, without the unconditioned topic-policy
    statement ``targets.SnsTopic`` adds for ``events.amazonaws.com``; the
    construct adds its own, limited to the rule."""

    def __init__(self, topic: sns.ITopic) -> None:
        self._topic = topic

    def bind(self, rule: IRuleRef, id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self._topic.topic_arn)


@dataclass(frozen=True)
class AlarmTopicProps:
    """``alarm_names`` are the alarms that publish here, each named
    ``<name_prefix>-<name>``; ``cluster_id`` the EMR cluster whose failures
    the rule forwards."""

    name_prefix: str
    instance_id: str
    emails: tuple[str, ...]
    alarm_names: tuple[str, ...]
    cluster_id: str
    removal_policy: RemovalPolicy


class AlarmTopic(Construct):
    """Exposes ``key``, ``topic``, ``emr_failure_rule`` and its ARN
    ``emr_failure_rule_arn``; outputs ``AlarmTopicArn``."""

    def __init__(self, scope: Construct, construct_id: str, *, props: AlarmTopicProps) -> None:
        super().__init__(scope, construct_id)
        key = stack_key(self, props.removal_policy)
        key.describe(f"the alarm topic of {props.instance_id}")
        self.key = key.key
        # The rule is named so its ARN is known before it exists: the key
        # policy must name it, and the rule (through the topic) needs the key.
        rule_name = emr_failure_rule_name(props.name_prefix)
        self.emr_failure_rule_arn = _arn("events", f"rule/{rule_name}")
        alarm_arns = [
            _arn("cloudwatch", f"alarm:{props.name_prefix}-{name}") for name in props.alarm_names
        ]
        # CloudWatch alarms and EventBridge publish to the encrypted topic: the
        # services may use the key for this instance's alarms and rule only (as
        # https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services
        # shows for AWS event sources of an encrypted topic).
        for sid, service, sources in (
            ("AlarmsUseTopicKey", "cloudwatch.amazonaws.com", alarm_arns),
            ("EmrFailureRuleUsesTopicKey", "events.amazonaws.com", [self.emr_failure_rule_arn]),
        ):
            self.key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=sid,
                    principals=[iam.ServicePrincipal(service)],
                    actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                    resources=["*"],
                    conditions=_from_own(sources),
                )
            )
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name=f"{props.name_prefix} alarms",
            master_key=self.key,
            enforce_ssl=True,
        )
        # The alarms publish as CloudWatch's service principal; the topic
        # policy (which CDK writes for enforce_ssl) names them, nothing else.
        self._allow_publish("AlarmsPublish", "cloudwatch.amazonaws.com", alarm_arns)
        for email in props.emails:
            self.topic.add_subscription(subs.EmailSubscription(email))

        self.emr_failure_rule = events.Rule(
            self,
            "EmrFailures",
            rule_name=rule_name,
            description=f"EMR step or cluster failures of {props.instance_id}",
            event_pattern=events.EventPattern(
                source=["aws.emr"],
                detail_type=["EMR Step Status Change", "EMR Cluster State Change"],
                detail={"clusterId": [props.cluster_id], "state": list(EMR_FAILURE_STATES)},
            ),
            targets=[_UngrantedTopicTarget(self.topic)],
        )
        # EventBridge may publish for this rule only
        # (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sns-permissions;
        # aws:SourceArn is the rule's ARN,
        # https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-conditions.html).
        self._allow_publish(
            "EmrFailureRulePublishes", "events.amazonaws.com", [self.emr_failure_rule.rule_arn]
        )
        stack_output(self, "AlarmTopicArn", self.topic.topic_arn)

    def _allow_publish(self, sid: str, service: str, sources: list[str]) -> None:
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid=sid,
                principals=[iam.ServicePrincipal(service)],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=_from_own(sources),
            )
        )
