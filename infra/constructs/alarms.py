"""The alarms of one instance: a typed list of alarm specs, one per delay the
job publishes, and the construct that turns them into CloudWatch alarms.

docs/design.md, "Incidents": a 10-second micro-batch ran 3+ minutes late for
hours and the only alarm was "0 records processed". Each delay the job
publishes has its own alarm here. Metric names, namespace and dimension come
from ``model.contract``, the module the job publishes with, so an alarm cannot
watch a metric nobody sends; :meth:`Alarms.grant_job` lets the job publish
them, in its instance's own namespace only. Thresholds and N-of-M windows are
the instance's :class:`~infra.config_sections.AlarmConfig`.

A new alarm is a spec in :func:`alarm_specs` (and its fields in
``AlarmConfig``); the topic's key and policy, which name every alarm, follow.
The alarms publish to the :class:`~infra.constructs.alarm_topic.AlarmTopic`
and are shown on the :class:`~infra.constructs.dashboard.Dashboard` (a graph
of a watched metric draws its spec's threshold).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kinesis as kinesis
from constructs import Construct

from infra.config import InstanceConfig
from infra.config_sections import AlarmConfig
from infra.constructs.alarm_topic import AlarmTopic, AlarmTopicProps
from infra.constructs.dashboard import Dashboard, DashboardProps
from infra.constructs.instance import removal_policy
from infra.constructs.metrics import ITERATOR_AGE, InstanceMetrics
from model import contract

CONSUMER_LAG: Final = "ConsumerLag"
SOURCE_LAG: Final = "SourceLag"
FALLING_BEHIND: Final = "FallingBehind"
END_TO_END_LATENCY: Final = "EndToEndLatency"
SCHEDULING_DELAY: Final = "SchedulingDelay"
FAILURE_RECORDS: Final = "FailureRecords"
HEARTBEAT_MISSING: Final = "HeartbeatMissing"
SUPERVISOR_GAVE_UP: Final = "SupervisorGaveUp"
# The supervisor's own function (infra/supervisor/construct.py builds these
# alarms): it fails, or it stops being invoked. Named here so the topic lets
# them publish (its policy names every alarm that may).
SUPERVISOR_ERRORS: Final = "SupervisorErrors"
SUPERVISOR_NOT_RUNNING: Final = "SupervisorNotRunning"
SUPERVISOR_FUNCTION_ALARMS: Final = (SUPERVISOR_ERRORS, SUPERVISOR_NOT_RUNNING)
GT: Final = cw.ComparisonOperator.GREATER_THAN_THRESHOLD


@dataclass(frozen=True)
class AlarmSpec:
    """One alarm, named ``<stack>-<name>``: the metric it watches (an
    ``model.contract`` name or :data:`~infra.constructs.metrics.ITERATOR_AGE`) and
    its statistic, when it fires (N of M periods beyond the threshold) and what
    it means (its description)."""

    name: str
    metric: str
    statistic: str
    threshold: float
    datapoints: int
    evaluation_periods: int
    description: str
    comparison: cw.ComparisonOperator = GT
    # Only the heartbeat breaches on silence: no data from the job is the job down.
    missing_data: cw.TreatMissingData = cw.TreatMissingData.NOT_BREACHING


def alarm_specs(config: AlarmConfig, trigger_interval_sec: int) -> tuple[AlarmSpec, ...]:
    """Every alarm of an instance, from its configuration (pure: tests read it
    without synthesizing). The alarm topic's key and policy name exactly these."""
    batch = (config.batch_duration_datapoints, config.batch_duration_evaluation_periods)
    lag = (config.lag_datapoints, config.lag_evaluation_periods)
    return (
        AlarmSpec(
            CONSUMER_LAG,
            ITERATOR_AGE,
            "Maximum",
            config.iterator_age_ms,
            *lag,
            "Kinesis GetRecords iterator age: the consumer is behind the stream tip.",
        ),
        AlarmSpec(
            SOURCE_LAG,
            contract.SOURCE_LAG_MS,
            "Maximum",
            config.iterator_age_ms,
            *lag,
            "Lag the job measures itself (also covers enhanced fan-out consumers).",
        ),
        AlarmSpec(
            FALLING_BEHIND,
            contract.BATCH_DURATION_MS,
            "Average",
            trigger_interval_sec * 1000,
            *batch,
            "Micro-batches take longer than the trigger interval: the job falls behind.",
        ),
        AlarmSpec(
            END_TO_END_LATENCY,
            contract.END_TO_END_LATENCY_MS,
            "Maximum",
            config.end_to_end_latency_ms,
            config.end_to_end_latency_datapoints,
            config.end_to_end_latency_evaluation_periods,
            "Records reach the table later than the allowed end-to-end latency.",
        ),
        AlarmSpec(
            SCHEDULING_DELAY,
            contract.SCHEDULING_DELAY_RATIO,
            "Average",
            config.scheduling_delay_ratio,
            *batch,
            "Most of each batch's latency is spent waiting to be scheduled.",
        ),
        AlarmSpec(
            FAILURE_RECORDS,
            contract.FAILURE_RECORDS,
            "Sum",
            config.failure_records,
            config.failure_records_datapoints,
            config.failure_records_evaluation_periods,
            "Records routed to the failure topic exceed the threshold.",
        ),
        AlarmSpec(
            HEARTBEAT_MISSING,
            contract.HEARTBEAT,
            "SampleCount",
            1,
            config.heartbeat_missing_periods,
            config.heartbeat_missing_periods,
            "The job stopped publishing its heartbeat: it is down or stuck.",
            comparison=cw.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing_data=cw.TreatMissingData.BREACHING,
        ),
        # The supervisor (infra/supervisor/) publishes 1 while it has given up.
        AlarmSpec(
            SUPERVISOR_GAVE_UP,
            contract.SUPERVISOR_GAVE_UP,
            "Maximum",
            0,
            1,
            1,
            "The supervisor stopped restarting the job: its restart budget is spent, or "
            "the job exited in a way a restart cannot cure. The alarm topic got the reason; "
            "make status shows it (docs/operate.md, 'The supervisor').",
        ),
    )


@dataclass(frozen=True)
class AlarmsProps:
    name_prefix: str
    instance_id: str
    trigger_interval_sec: int
    config: AlarmConfig
    stream: kinesis.IStream
    cluster_id: str
    removal_policy: RemovalPolicy

    @classmethod
    def of(cls, instance: InstanceConfig, stream: kinesis.IStream, cluster_id: str) -> AlarmsProps:
        """The instance's alarms, named ``<stack>-<alarm>``, on its trigger interval."""
        return cls(
            instance.stack_name,
            instance.instance_id,
            instance.job.trigger_interval_sec,
            instance.alarms,
            stream,
            cluster_id,
            removal_policy(instance),
        )


class Alarms(Construct):
    """Exposes ``alarms`` (by name), ``metrics`` (the instance's metrics),
    ``namespace`` (its metric namespace), ``topic`` (the
    :class:`~infra.constructs.alarm_topic.AlarmTopic`) and ``dashboard``;
    :meth:`grant_job` lets the job publish the watched metrics.

    The topic and the dashboard are built inside this construct, the topic
    under the id ``Default``, which CDK leaves out of logical IDs: its key,
    topic and rule keep the logical IDs they had before they had a module of
    their own (a changed ID would replace them)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: AlarmsProps) -> None:
        super().__init__(scope, construct_id)
        self.namespace = contract.metric_namespace(props.instance_id)
        period = Duration.seconds(props.config.period_sec)
        self.metrics = InstanceMetrics(
            namespace=self.namespace,
            instance_id=props.instance_id,
            period=period,
            iterator_age=props.stream.metric_get_records_iterator_age_milliseconds(
                statistic="Maximum", period=period
            ),
        )
        specs = alarm_specs(props.config, props.trigger_interval_sec)
        self.topic = AlarmTopic(
            self,
            "Default",
            props=AlarmTopicProps(
                name_prefix=props.name_prefix,
                instance_id=props.instance_id,
                emails=props.config.emails,
                alarm_names=(*(spec.name for spec in specs), *SUPERVISOR_FUNCTION_ALARMS),
                cluster_id=props.cluster_id,
                removal_policy=props.removal_policy,
            ),
        )
        action = cw_actions.SnsAction(self.topic.topic)
        self.alarms: dict[str, cw.Alarm] = {}
        for spec in specs:
            self.alarms[spec.name] = cw.Alarm(
                self,
                spec.name,
                alarm_name=f"{props.name_prefix}-{spec.name}",
                alarm_description=spec.description,
                metric=self.metrics.metric(spec.metric, spec.statistic),
                threshold=spec.threshold,
                comparison_operator=spec.comparison,
                datapoints_to_alarm=spec.datapoints,
                evaluation_periods=spec.evaluation_periods,
                treat_missing_data=spec.missing_data,
            )
        for alarm in self.alarms.values():
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        alarms = tuple(self.alarms.values())
        self.dashboard = Dashboard(
            self,
            "Dashboard",
            props=DashboardProps(
                props.name_prefix, props.trigger_interval_sec, self.metrics, specs, alarms
            ),
        )

    def grant_job(self, role: iam.IRole) -> None:
        """Publish the metrics these alarms watch, in this instance's namespace
        only. ``PutMetricData`` has no resource-level permissions; the
        ``cloudwatch:namespace`` condition is the only scope IAM offers
        (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/iam-cw-condition-keys-namespace.html),
        which is why each instance has a namespace of its own
        (``model.contract.metric_namespace``): a shared one would let a
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
