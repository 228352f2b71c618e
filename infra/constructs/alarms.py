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
from typing import Final

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
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

EMR_FAILURE_STATES: Final = ("FAILED", "TERMINATED_WITH_ERRORS", "TERMINATED")


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
        # CloudWatch alarms and EventBridge publish to the encrypted topic.
        for service in ("cloudwatch.amazonaws.com", "events.amazonaws.com"):
            self.key.grant(iam.ServicePrincipal(service), "kms:Decrypt", "kms:GenerateDataKey*")
        self.topic = sns.Topic(
            self,
            "Topic",
            display_name=f"{props.name_prefix} alarms",
            master_key=self.key,
            enforce_ssl=True,
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
        for alarm in self.alarms.values():
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)

        self.emr_failure_rule = events.Rule(
            self,
            "EmrFailures",
            description=f"EMR step or cluster failures of {props.instance_id}",
            event_pattern=events.EventPattern(
                source=["aws.emr"],
                detail_type=["EMR Step Status Change", "EMR Cluster State Change"],
                detail={"clusterId": [props.cluster_id], "state": list(EMR_FAILURE_STATES)},
            ),
            targets=[targets.SnsTopic(self.topic)],
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
