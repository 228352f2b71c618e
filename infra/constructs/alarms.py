"""Alarms, notifications and the dashboard of one instance.

docs/design.md, "Incidents": a 10-second micro-batch ran 3+ minutes late for
hours and the only alarm was "0 records processed". Each delay the job
publishes has its own alarm here. Metric names, namespace and dimension come
from ``app.contract``, the module the job publishes with, so an alarm cannot
watch a metric nobody sends; :meth:`Alarms.grant_job` lets the job publish
them, in its instance's own namespace only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import jsii
from aws_cdk import Acknowledgment, Aws, Duration, RemovalPolicy, Validations
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from aws_cdk.interfaces.aws_events import IRuleRef
from constructs import Construct

from app import contract
from app.transform import REASONS
from infra.config import AlarmConfig

CONSUMER_LAG: Final = "ConsumerLag"
SOURCE_LAG: Final = "SourceLag"
FALLING_BEHIND: Final = "FallingBehind"
END_TO_END_LATENCY: Final = "EndToEndLatency"
SCHEDULING_DELAY: Final = "SchedulingDelay"
FAILURE_RECORDS: Final = "FailureRecords"
HEARTBEAT_MISSING: Final = "HeartbeatMissing"
# Every alarm of an instance, named ``<stack>-<name>``; the alarm key's
# policy names them by ARN.
ALARM_NAMES: Final = (
    CONSUMER_LAG,
    SOURCE_LAG,
    FALLING_BEHIND,
    END_TO_END_LATENCY,
    SCHEDULING_DELAY,
    FAILURE_RECORDS,
    HEARTBEAT_MISSING,
)

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
    """Conditions for a service principal acting for these resources of this
    account only (the confused-deputy guard,
    https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html)."""
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
class AlarmsProps:
    name_prefix: str
    instance_id: str
    trigger_interval_sec: int
    config: AlarmConfig
    stream: kinesis.IStream
    cluster_id: str
    removal_policy: RemovalPolicy


class Alarms(Construct):
    """Exposes ``topic``, ``alarms`` (by name), ``metrics``, ``namespace`` (the
    instance's metric namespace), ``emr_failure_rule`` and ``dashboard``;
    :meth:`grant_job` lets the job publish the watched metrics."""

    def __init__(self, scope: Construct, construct_id: str, *, props: AlarmsProps) -> None:
        super().__init__(scope, construct_id)
        config = props.config
        period = Duration.seconds(config.period_sec)
        self.namespace = contract.metric_namespace(props.instance_id)

        self.key = kms.Key(
            self,
            "TopicKey",
            description=f"Encrypts the alarm topic of {props.instance_id}",
            enable_key_rotation=True,
            removal_policy=props.removal_policy,
        )
        # The rule is named so its ARN is known before it exists: the key
        # policy must name it, and the rule (through the topic) needs the key.
        rule_name = emr_failure_rule_name(props.name_prefix)
        self.emr_failure_rule_arn = _arn("events", f"rule/{rule_name}")
        alarm_arns = [
            _arn("cloudwatch", f"alarm:{props.name_prefix}-{name}") for name in ALARM_NAMES
        ]
        # CloudWatch alarms and EventBridge publish to the encrypted topic: the
        # services may use the key for this instance's alarms and rule only
        # (aws:SourceArn, aws:SourceAccount on the service principals, as
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
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=_from_own(alarm_arns),
            )
        )
        for email in config.emails:
            self.topic.add_subscription(subs.EmailSubscription(email))
        action = cw_actions.SnsAction(self.topic)

        def metric(name: str, statistic: str) -> cw.Metric:
            return cw.Metric(
                namespace=self.namespace,
                metric_name=name,
                dimensions_map={contract.INSTANCE_DIMENSION: props.instance_id},
                statistic=statistic,
                period=period,
            )

        self.metrics: dict[str, cw.IMetric] = {
            contract.BATCH_DURATION_MS: metric(contract.BATCH_DURATION_MS, "Average"),
            contract.END_TO_END_LATENCY_MS: metric(contract.END_TO_END_LATENCY_MS, "Maximum"),
            contract.SCHEDULING_DELAY_RATIO: metric(contract.SCHEDULING_DELAY_RATIO, "Average"),
            contract.FAILURE_RECORDS: metric(contract.FAILURE_RECORDS, "Sum"),
            contract.HEARTBEAT: metric(contract.HEARTBEAT, "SampleCount"),
            contract.SOURCE_LAG_MS: metric(contract.SOURCE_LAG_MS, "Maximum"),
            contract.INPUT_ROWS_PER_SECOND: metric(contract.INPUT_ROWS_PER_SECOND, "Average"),
            contract.PROCESSED_ROWS_PER_SECOND: metric(
                contract.PROCESSED_ROWS_PER_SECOND, "Average"
            ),
        }
        iterator_age = props.stream.metric_get_records_iterator_age_milliseconds(
            statistic="Maximum", period=period
        )
        gt = cw.ComparisonOperator.GREATER_THAN_THRESHOLD
        n_of_m = (config.batch_duration_datapoints, config.batch_duration_evaluation_periods)
        specs: list[tuple[str, cw.IMetric, float, cw.ComparisonOperator, int, int, str]] = [
            (
                CONSUMER_LAG,
                iterator_age,
                config.iterator_age_ms,
                gt,
                3,
                3,
                "Kinesis GetRecords iterator age: the consumer is behind the stream tip.",
            ),
            (
                SOURCE_LAG,
                self.metrics[contract.SOURCE_LAG_MS],
                config.iterator_age_ms,
                gt,
                3,
                3,
                "Lag the job measures itself (also covers enhanced fan-out consumers).",
            ),
            (
                FALLING_BEHIND,
                self.metrics[contract.BATCH_DURATION_MS],
                props.trigger_interval_sec * 1000,
                gt,
                *n_of_m,
                "Micro-batches take longer than the trigger interval: the job falls behind.",
            ),
            (
                END_TO_END_LATENCY,
                self.metrics[contract.END_TO_END_LATENCY_MS],
                config.end_to_end_latency_ms,
                gt,
                2,
                3,
                "Records reach the table later than the allowed end-to-end latency.",
            ),
            (
                SCHEDULING_DELAY,
                self.metrics[contract.SCHEDULING_DELAY_RATIO],
                config.scheduling_delay_ratio,
                gt,
                *n_of_m,
                "Most of each batch's latency is spent waiting to be scheduled.",
            ),
            (
                FAILURE_RECORDS,
                self.metrics[contract.FAILURE_RECORDS],
                config.failure_records,
                gt,
                1,
                1,
                "Records routed to the failure topic exceed the threshold.",
            ),
        ]
        self.alarms: dict[str, cw.Alarm] = {}
        for name, watched, threshold, operator, datapoints, periods, why in specs:
            self.alarms[name] = cw.Alarm(
                self,
                name,
                alarm_name=f"{props.name_prefix}-{name}",
                alarm_description=why,
                metric=watched,
                threshold=threshold,
                comparison_operator=operator,
                datapoints_to_alarm=datapoints,
                evaluation_periods=periods,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
        # No heartbeat at all is the job being down: missing data breaches.
        self.alarms[HEARTBEAT_MISSING] = cw.Alarm(
            self,
            HEARTBEAT_MISSING,
            alarm_name=f"{props.name_prefix}-{HEARTBEAT_MISSING}",
            alarm_description="The job stopped publishing its heartbeat: it is down or stuck.",
            metric=self.metrics[contract.HEARTBEAT],
            threshold=1,
            comparison_operator=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            datapoints_to_alarm=config.heartbeat_missing_periods,
            evaluation_periods=config.heartbeat_missing_periods,
            treat_missing_data=cw.TreatMissingData.BREACHING,
        )
        if set(self.alarms) != set(ALARM_NAMES):
            raise ValueError(f"alarms {sorted(self.alarms)}; allowed: exactly ALARM_NAMES")
        for alarm in self.alarms.values():
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

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
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EmrFailureRulePublishes",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=_from_own([self.emr_failure_rule.rule_arn]),
            )
        )

        self.dashboard = self._dashboard(props, metric, iterator_age)

    def _dashboard(
        self,
        props: AlarmsProps,
        metric: Callable[[str, str], cw.Metric],
        iterator_age: cw.IMetric,
    ) -> cw.Dashboard:
        """What the run report (``local/report.py``) shows, for a deployed
        instance: the time range's totals, batch duration against the trigger
        interval with the batch count, end-to-end latency, lag, input vs
        processed rate, failure records against records in, and failure records
        by reason (one ``FailureRecordsByReason`` series per reason of the
        job's taxonomy, each with the ``Reason`` dimension).

        Statistics (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Statistics-definitions.html):
        ``SampleCount`` of a per-batch metric is the number of batches in the
        period, ``Sum`` of ``InputRows`` the records in, ``Maximum`` of
        ``BatchDurationMs`` the slowest batch. A single-value widget with
        ``setPeriodToTimeRange`` shows one value for the whole time range
        (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html).
        """
        config = props.config
        trigger_ms = props.trigger_interval_sec * 1000

        def labelled(name: str, statistic: str, label: str) -> cw.Metric:
            return metric(name, statistic).with_(label=label)

        batches = labelled(contract.BATCH_DURATION_MS, "SampleCount", "batches")
        dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=props.name_prefix)
        dashboard.add_widgets(
            cw.AlarmStatusWidget(alarms=list(self.alarms.values()), title="Alarms", width=24)
        )
        dashboard.add_widgets(
            cw.SingleValueWidget(
                title="This time range",
                metrics=[
                    batches,
                    labelled(contract.INPUT_ROWS, "Sum", "records in"),
                    labelled(contract.FAILURE_RECORDS, "Sum", "failure records"),
                    labelled(contract.BATCH_DURATION_MS, "Maximum", "slowest batch (ms)"),
                    labelled(contract.END_TO_END_LATENCY_MS, "Maximum", "max latency (ms)"),
                ],
                set_period_to_time_range=True,
                width=24,
            )
        )

        def alarm_line(value: float, label: str) -> list[cw.HorizontalAnnotation]:
            return [cw.HorizontalAnnotation(value=value, label=label)]

        graphs: list[cw.GraphWidget] = [
            cw.GraphWidget(
                width=12,
                title="Batch duration (ms) vs trigger interval",
                left=[
                    labelled(contract.BATCH_DURATION_MS, "Average", "average batch"),
                    labelled(contract.BATCH_DURATION_MS, "Maximum", "slowest batch"),
                ],
                right=[batches],
                left_annotations=alarm_line(
                    trigger_ms,
                    f"trigger interval {props.trigger_interval_sec} s ({FALLING_BEHIND} alarm)",
                ),
            ),
            cw.GraphWidget(
                width=12,
                title="End-to-end latency (ms)",
                left=[self.metrics[contract.END_TO_END_LATENCY_MS]],
                left_annotations=alarm_line(
                    config.end_to_end_latency_ms, f"{END_TO_END_LATENCY} alarm"
                ),
            ),
            cw.GraphWidget(
                width=12,
                title="Scheduling-delay ratio",
                left=[self.metrics[contract.SCHEDULING_DELAY_RATIO]],
                left_annotations=alarm_line(
                    config.scheduling_delay_ratio, f"{SCHEDULING_DELAY} alarm"
                ),
            ),
            cw.GraphWidget(
                width=12,
                title="Consumer lag (ms)",
                left=[iterator_age, self.metrics[contract.SOURCE_LAG_MS]],
                left_annotations=alarm_line(
                    config.iterator_age_ms, f"{CONSUMER_LAG} / {SOURCE_LAG} alarm"
                ),
            ),
            cw.GraphWidget(
                width=12,
                title="Input vs processed rate (rows/s)",
                left=[
                    labelled(contract.INPUT_ROWS_PER_SECOND, "Average", "input rows/s"),
                    labelled(contract.PROCESSED_ROWS_PER_SECOND, "Average", "processed rows/s"),
                ],
            ),
            cw.GraphWidget(
                width=12,
                title="Failure records vs records in",
                left=[labelled(contract.FAILURE_RECORDS, "Sum", "failure records")],
                right=[labelled(contract.INPUT_ROWS, "Sum", "records in")],
                left_annotations=alarm_line(config.failure_records, f"{FAILURE_RECORDS} alarm"),
            ),
            cw.GraphWidget(
                width=12,
                title="Failure records by reason",
                left=[
                    metric(contract.FAILURE_RECORDS_BY_REASON, "Sum").with_(
                        dimensions_map={
                            contract.INSTANCE_DIMENSION: props.instance_id,
                            contract.REASON_DIMENSION: reason,
                        },
                        label=reason,
                    )
                    for reason in REASONS
                ],
                stacked=True,
            ),
            cw.GraphWidget(width=12, title="Heartbeat", left=[self.metrics[contract.HEARTBEAT]]),
        ]
        for graph in graphs:
            dashboard.add_widgets(graph)
        return dashboard

    def grant_job(self, role: iam.IRole) -> None:
        """Publish the metrics these alarms watch, in this instance's namespace
        only. ``PutMetricData`` has no resource-level permissions; the
        ``cloudwatch:namespace`` condition is the only scope IAM offers
        (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/iam-cw-condition-keys-namespace.html),
        which is why each instance has a namespace of its own
        (``app.contract.metric_namespace``): a shared one would let a
        neighbour publish this instance's heartbeat."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PutMetricsInInstanceNamespace",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": self.namespace}},
            )
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="cloudwatch:PutMetricData has no resource-level permissions; the "
                "statement is limited by a cloudwatch:namespace condition to this "
                "instance's own namespace.",
            )
        )
