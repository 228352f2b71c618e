"""The supervisor of one instance: a Lambda on a schedule that restarts the
job when it is down, within a restart budget (infra/supervisor/;
docs/operate.md, "The supervisor"). One construct, two restart targets: the
stack's own step on its EMR cluster (:class:`EmrStepTarget`) or the stack's
own ``StartJobRun`` request on its EMR Serverless application
(:class:`ServerlessRunTarget`, docs/serverless.md). The target adds its
platform's grant and environment; the rest below is the same for both.

Why a scheduled Lambda: it survives the cluster (it reads the lease and the
exit record in S3, not YARN), costs a few invocations a minute, and its
decision is a pure function the local harness runs too. Why not EMR: an
``AWS::EMR::Step`` has no retry, and the step completes once YARN accepts the
job (infra/emr_step.py).

Least privilege, each grant on this instance's own resources only:

* S3: read the lease, the exit record and the stop marker
  (``checkpoints/<instance>/_lease``, ``_exit``, ``control/<instance>/stop``),
  read and write its state (``control/<instance>/supervisor.json``); and
  ``s3:ListBucket`` limited by ``s3:prefix`` to exactly those keys, for the
  call that tells whether each exists: ``ListObjectsV2`` with ``Prefix`` equal
  to the key (its ``prefix`` parameter is what ``s3:prefix`` matches:
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html,
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html;
  the call: https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html).
  GetObject's 404-vs-403 is not relied on: whether its implicit ListBucket
  check carries ``s3:prefix`` is not documented;
* EMR target: ``DescribeCluster``, ``ListSteps``, ``AddJobFlowSteps`` on this
  cluster's ARN (resource type ``cluster``,
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelasticmapreduce.html);
  the step carries no role, so no ``iam:PassRole``; and ``DescribeStacks`` on
  its own stack's ID only (resource type ``stack``,
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_awscloudformation.html;
  the API page's own example limits the action to stack ARNs,
  https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html),
  whose status gates a hand-back after a rolled-back deploy;
* serverless target: ``GetApplication``, ``ListJobRuns``, ``StartJobRun`` on
  this application and its job runs (resource types ``applicationId`` and
  ``jobRunId``,
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonemrserverless.html),
  and ``iam:PassRole`` of the request's execution role, to
  ``emr-serverless.amazonaws.com`` only (``iam:PassedToService``);
* CloudWatch: ``PutMetricData`` in the instance's namespace only (a condition:
  the action has no resource-level permissions);
* SNS: publish to the instance's alarm topic (and its key).

A broken supervisor does not fail silently: an alarm on the function's
``Errors`` and one on its ``Invocations`` missing (missing data breaches), both
to the instance's alarm topic (Lambda's metrics:
https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html).
A failed check is retried by Lambda's asynchronous queue (twice by default,
https://docs.aws.amazon.com/lambda/latest/dg/invocation-async-error-handling.html),
bounded here by the event's age, and the schedule's target retries a failed
delivery. Reserved concurrency 1: two checks never run at once (a second
concurrent delivery is throttled and goes back to the queue, same page). A
duplicate delivery, which that page says may happen, is then only one more
check after the first: it reads the state the first one wrote (S3 reads
after writes are strongly consistent) and sees the restart's step PENDING or
RUNNING, or its job run active (a start under way: wait), so it never
restarts twice.

The schedule is an EventBridge rule (``rate(N minute[s])``,
https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rate-expressions.html);
the step (or the request) travels as JSON in an environment variable, whose
total is limited to 4 KB (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Final, Protocol

from aws_cdk import (
    Acknowledgment,
    Aws,
    Duration,
    RemovalPolicy,
    Stack,
    Stage,
    Validations,
)
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from artifacts.packaging import REPO_ROOT, SUPERVISOR_HANDLER, stage_supervisor
from infra.config import InstanceConfig
from infra.constructs.alarms import SUPERVISOR_ERRORS, SUPERVISOR_NOT_RUNNING
from infra.constructs.logs_key import encrypted_log_group, retention_days
from infra.constructs.roles import depend_on_policy_only
from infra.serverless.app import grant_job_runs
from infra.serverless.job_run import restart_budget_split
from infra.supervisor import handler, serverless
from infra.supervisor.decision import Policy
from model import contract
from model.config import JobConfig
from model.lease import lease_path
from model.storage_uri import parse_s3_uri

# A check lists and reads four keys, one cluster and its steps (or one
# application and its runs), and writes two: well
# within this, and shorter than the shortest schedule, so checks never overlap.
TIMEOUT_SEC: Final = 50
MEMORY_MB: Final = 256
# The schedule's target retries a delivery that failed (EventBridge's retry
# policy, https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rule-retry-policy.html).
SCHEDULE_RETRY_ATTEMPTS: Final = 4
# One check at a time: a concurrent delivery is throttled and queued again.
RESERVED_CONCURRENCY: Final = 1
# The cdk-nag findings on the role, acknowledged with their reasons.
ROLE_FINDINGS: Final = (
    (
        "AwsSolutions-IAM5[Resource::*]",
        "cloudwatch:PutMetricData has no resource-level permissions; the statement is "
        "limited by a cloudwatch:namespace condition to this instance's own namespace.",
    ),
    (
        "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]",
        "CDK's grant_publish on the encrypted alarm topic: the key is the topic's own, "
        "used to encrypt what the supervisor publishes there.",
    ),
)


def policy_for(instance: InstanceConfig, stop_timeout_sec: int) -> Policy:
    """The instance's restart policy. A handover's new version is submitted
    once the old one released the lease, at most ``stop_timeout_sec`` after
    it was asked, then gets ``start_grace_sec`` to hold the lease."""
    config = instance.supervisor
    return Policy(
        max_restarts=config.max_restarts_per_hour,
        window_sec=3_600,
        backoff_sec=config.backoff_sec,
        backoff_max_sec=config.backoff_max_sec,
        start_grace_sec=config.start_grace_sec,
        handover_grace_sec=stop_timeout_sec + config.start_grace_sec,
    )


def serverless_policy_for(instance: InstanceConfig, stop_timeout_sec: int) -> Policy:
    """:func:`policy_for` with the supervisor's share of the restart budget
    on EMR Serverless: the service retries with the rest."""
    _, restarts = restart_budget_split(instance.supervisor.max_restarts_per_hour)
    return replace(policy_for(instance, stop_timeout_sec), max_restarts=restarts)


def _key(uri: str) -> str:
    return parse_s3_uri(uri)[1]


class RestartTarget(Protocol):
    """What the supervisor restarts: the Lambda's entry point, the variables
    its ``handler.Target`` reads, and the grant it needs on its platform."""

    @property
    def handler(self) -> str: ...

    def environment(self, stack: Stack) -> dict[str, str]: ...

    def grant(self, role: iam.Role) -> None: ...


@dataclass(frozen=True)
class EmrStepTarget:
    """The stack's own step (``infra.emr_step.build_step``) on its cluster."""

    cluster_id: str
    step: dict[str, Any]

    @property
    def handler(self) -> str:
        return SUPERVISOR_HANDLER

    def environment(self, stack: Stack) -> dict[str, str]:
        return {
            handler.ENV_CLUSTER_ID: self.cluster_id,
            handler.ENV_STEP: stack.to_json_string(self.step),
            # AWS::StackId: the stack's ARN, whose status gates a hand-back.
            handler.ENV_STACK_ARN: stack.stack_id,
        }

    def grant(self, role: iam.Role) -> None:
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DescribeOwnStack",
                actions=["cloudformation:DescribeStacks"],
                resources=[Stack.of(role).stack_id],
            )
        )
        cluster_arn = (
            f"arn:{Aws.PARTITION}:elasticmapreduce:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
            f"cluster/{self.cluster_id}"
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="RestartOnOwnCluster",
                actions=[
                    "elasticmapreduce:DescribeCluster",
                    "elasticmapreduce:ListSteps",
                    "elasticmapreduce:AddJobFlowSteps",
                ],
                resources=[cluster_arn],
            )
        )


@dataclass(frozen=True)
class ServerlessRunTarget:
    """The stack's own StartJobRun request (infra/serverless/job_run.py) on
    its application."""

    application_id: str
    request: dict[str, Any]

    @property
    def handler(self) -> str:
        return serverless.HANDLER

    def environment(self, stack: Stack) -> dict[str, str]:
        return {
            serverless.ENV_APPLICATION_ID: self.application_id,
            serverless.ENV_REQUEST: stack.to_json_string(self.request),
        }

    def grant(self, role: iam.Role) -> None:
        grant_job_runs(
            role,
            application_id=self.application_id,
            execution_role_arn=str(self.request["executionRoleArn"]),
            sid="RestartOnOwnApplication",
            actions=("GetApplication", "ListJobRuns", "StartJobRun"),
        )


@dataclass(frozen=True)
class SupervisorProps:
    instance: InstanceConfig
    job_config: JobConfig
    data_bucket: s3.IBucket
    target: RestartTarget
    policy: Policy
    alarm_topic: sns.ITopic
    removal_policy: RemovalPolicy


class Supervisor(Construct):
    """Exposes ``function``, ``role`` and ``schedule``."""

    def __init__(self, scope: Construct, construct_id: str, *, props: SupervisorProps) -> None:
        super().__init__(scope, construct_id)
        instance = props.instance
        config = props.job_config
        if config.stop_marker_path is None:
            raise ValueError(
                "job_config.stop_marker_path: None; the supervisor keeps its state beside it"
            )
        checkpoint = config.checkpoint_location
        state_uri = contract.supervisor_state_path(config.stop_marker_path)
        read_keys = [
            _key(lease_path(checkpoint)),
            _key(contract.exit_record_path(checkpoint)),
            _key(config.stop_marker_path),
            _key(state_uri),
        ]
        log_group = encrypted_log_group(
            self,
            "Logs",
            what="the job supervisor",
            retention=retention_days(instance.retention.function_log_days),
            removal_policy=props.removal_policy,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Restarts the streaming job of {instance.instance_id} within its budget",
        )
        log_group.grant_write(self.role)
        bucket = props.data_bucket
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadLeaseExitMarkerAndState",
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(key) for key in read_keys],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteState",
                actions=["s3:PutObject"],
                resources=[bucket.arn_for_objects(_key(state_uri))],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                # ListObjectsV2 with Prefix equal to one of these keys, and
                # nothing else: whether it exists (infra.s3_keys.key_exists).
                sid="ListOwnKeysByExactPrefix",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringEquals": {"s3:prefix": read_keys}},
            )
        )
        props.target.grant(self.role)
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PutMetricsInInstanceNamespace",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={
                    "StringEquals": {
                        "cloudwatch:namespace": contract.metric_namespace(instance.instance_id)
                    }
                },
            )
        )
        props.alarm_topic.grant_publish(self.role)
        for finding, reason in ROLE_FINDINGS:
            Validations.of(self.role).acknowledge(Acknowledgment(id=finding, reason=reason))
        stack = Stack.of(self)
        staged = stage_supervisor(REPO_ROOT, Path(Stage.of(self).outdir))  # type: ignore[union-attr]
        environment = {
            handler.ENV_INSTANCE: instance.instance_id,
            **props.target.environment(stack),
            handler.ENV_CHECKPOINT: checkpoint,
            handler.ENV_STATE: state_uri,
            handler.ENV_POLICY: json.dumps(asdict(props.policy), sort_keys=True),
            handler.ENV_TOPIC: props.alarm_topic.topic_arn,
            handler.ENV_STOP_MARKER: config.stop_marker_path,
        }
        minutes = instance.supervisor.check_minutes
        self.function = lambda_.Function(
            self,
            "Function",
            # python3.14: a supported runtime (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtimes.html)
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler=props.target.handler,
            code=lambda_.Code.from_asset(str(staged)),
            timeout=Duration.seconds(TIMEOUT_SEC),
            memory_size=MEMORY_MB,
            role=self.role,
            log_group=log_group,
            environment=environment,
            description=f"Supervisor of {instance.instance_id}: restarts its job within a budget",
            reserved_concurrent_executions=RESERVED_CONCURRENCY,
            # A queued check older than the next one is worth nothing: the
            # next one observes afresh (60 s is the least allowed,
            # https://docs.aws.amazon.com/lambda/latest/api/API_PutFunctionEventInvokeConfig.html).
            max_event_age=Duration.seconds(max(60, minutes * 60)),
            retry_attempts=2,
        )
        depend_on_policy_only(self.function, self.role)
        self.schedule = events.Rule(
            self,
            "Schedule",
            description=f"Checks the job of {instance.instance_id}",
            schedule=events.Schedule.rate(Duration.minutes(minutes)),
            targets=[
                targets.LambdaFunction(
                    self.function,
                    retry_attempts=SCHEDULE_RETRY_ATTEMPTS,
                    max_event_age=Duration.seconds(max(60, minutes * 60)),
                )
            ],
        )
        self.alarms = self._alarms(instance, props.alarm_topic, minutes)

    def _alarms(
        self, instance: InstanceConfig, topic: sns.ITopic, minutes: int
    ) -> dict[str, cw.Alarm]:
        """Its errors, and it not running: a period of three checks with no
        invocation (missing data breaches: a function never invoked publishes
        nothing)."""
        period = Duration.minutes(3 * minutes)
        who = f"The supervisor of {instance.instance_id}"
        compare, missing = cw.ComparisonOperator, cw.TreatMissingData
        specs = (
            (
                (SUPERVISOR_ERRORS, "ErrorsAlarm"),
                f"{who} failed a check: it cannot restart the job while it fails. "
                "Its log group has the error.",
                self.function.metric_errors(period=period, statistic="Sum"),
                (0, compare.GREATER_THAN_THRESHOLD, missing.NOT_BREACHING),
            ),
            (
                (SUPERVISOR_NOT_RUNNING, "NotRunningAlarm"),
                f"{who} was not invoked for {3 * minutes} minutes: its schedule is "
                "disabled or it is throttled; nothing restarts the job meanwhile.",
                self.function.metric_invocations(period=period, statistic="Sum"),
                (1, compare.LESS_THAN_THRESHOLD, missing.BREACHING),
            ),
        )
        action = cw_actions.SnsAction(topic)
        alarms: dict[str, cw.Alarm] = {}
        for (name, alarm_id), description, metric, (threshold, comparison, data) in specs:
            alarm = cw.Alarm(
                self,
                alarm_id,
                alarm_name=f"{instance.stack_name}-{name}",
                alarm_description=description,
                metric=metric,
                threshold=threshold,
                comparison_operator=comparison,
                evaluation_periods=1,
                treat_missing_data=data,
            )
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
            alarms[name] = alarm
        return alarms
