"""The supervisor of a ``"compute": "serverless"`` instance: the EMR
supervisor's Lambda code, decision and policy (infra/constructs/supervisor.py,
infra/supervisor/), with the serverless observation and restart
(infra/supervisor/serverless.py).

Least privilege, each grant on this instance's own resources only: read the
lease and the exit record, read and write its state (``s3:ListBucket`` limited
by ``s3:prefix`` to those keys, so a missing key reads as 404); on its own
application ``GetApplication``, ``ListJobRuns`` and ``StartJobRun`` (resource
types ``applicationId`` and ``jobRunId``,
https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonemrserverless.html)
and ``iam:PassRole`` of the execution role to EMR Serverless only;
``PutMetricData`` in the instance's namespace; publish to its alarm topic.

The request travels as JSON in an environment variable, whose total is
limited to 4 KB (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html);
tests/infra/stacks/test_serverless_stack.py measures it.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Final

from aws_cdk import (
    Acknowledgment,
    Aws,
    CfnResource,
    Duration,
    RemovalPolicy,
    Stack,
    Stage,
    Validations,
)
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from app import contract
from app.config import JobConfig
from app.lease import lease_path
from app.storage_uri import parse_s3_uri
from infra.config import InstanceConfig
from infra.constructs.logs_key import encrypted_log_group, retention_days
from infra.constructs.supervisor import MEMORY_MB, TIMEOUT_SEC, policy_for
from infra.packaging import SUPERVISOR_FILES, content_digest
from infra.serverless_job_run import restart_budget_split
from infra.supervisor import serverless
from infra.supervisor.decision import Policy

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
SERVERLESS_SUPERVISOR_FILES: Final = (*SUPERVISOR_FILES, "infra/supervisor/serverless.py")


def serverless_policy_for(instance: InstanceConfig, stop_timeout_sec: int) -> Policy:
    """The EMR supervisor's policy (``policy_for``) with the supervisor's
    share of the restart budget: the service retries with the rest."""
    _, restarts = restart_budget_split(instance.supervisor.max_restarts_per_hour)
    return replace(policy_for(instance, stop_timeout_sec), max_restarts=restarts)


def stage_serverless_supervisor(root: Path, stage_dir: Path) -> Path:
    files = {rel: (root / rel).read_bytes() for rel in SERVERLESS_SUPERVISOR_FILES}
    target = stage_dir / f"serverless-supervisor-{content_digest(files)}"
    if target.is_dir():
        shutil.rmtree(target)
    for rel, content in files.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(content)
    return target


def _key(uri: str) -> str:
    return parse_s3_uri(uri)[1]


@dataclass(frozen=True)
class ServerlessSupervisorProps:
    instance: InstanceConfig
    job_config: JobConfig
    data_bucket: s3.IBucket
    application_id: str
    request: dict[str, Any]
    policy: Policy
    alarm_topic: sns.ITopic
    removal_policy: RemovalPolicy


class ServerlessSupervisor(Construct):
    """Exposes ``function``, ``role`` and ``schedule``."""

    def __init__(
        self, scope: Construct, construct_id: str, *, props: ServerlessSupervisorProps
    ) -> None:
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
                sid="ReadLeaseExitAndState",
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
                sid="MissingKeysRead404",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringEquals": {"s3:prefix": read_keys}},
            )
        )
        application_arn = (
            f"arn:{Aws.PARTITION}:emr-serverless:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
            f"/applications/{props.application_id}"
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="RestartOnOwnApplication",
                actions=[
                    "emr-serverless:GetApplication",
                    "emr-serverless:ListJobRuns",
                    "emr-serverless:StartJobRun",
                ],
                resources=[application_arn, f"{application_arn}/jobruns/*"],
            )
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PassExecutionRole",
                actions=["iam:PassRole"],
                resources=[str(props.request["executionRoleArn"])],
                conditions={
                    "StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}
                },
            )
        )
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
        stack = Stack.of(self)
        for finding, reason in (
            (
                "AwsSolutions-IAM5[Resource::*]",
                "cloudwatch:PutMetricData has no resource-level permissions; the statement "
                "is limited by a cloudwatch:namespace condition to this instance's own "
                "namespace.",
            ),
            (
                "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]",
                "CDK's grant_publish on the encrypted alarm topic: the key is the topic's "
                "own, used to encrypt what the supervisor publishes there.",
            ),
            (
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:emr-serverless:<AWS::Region>:"
                f"<AWS::AccountId>:/applications/<{_application_logical_id(stack, props)}"
                ".ApplicationId>/jobruns/*]",
                "The job runs of this instance's own application: their IDs are made when "
                "they start.",
            ),
        ):
            Validations.of(self.role).acknowledge(Acknowledgment(id=finding, reason=reason))
        staged = stage_serverless_supervisor(REPO_ROOT, Path(Stage.of(self).outdir))  # type: ignore[union-attr]
        environment = {
            serverless.ENV_INSTANCE: instance.instance_id,
            serverless.ENV_APPLICATION_ID: props.application_id,
            serverless.ENV_CHECKPOINT: checkpoint,
            serverless.ENV_STATE: state_uri,
            serverless.ENV_REQUEST: stack.to_json_string(props.request),
            serverless.ENV_POLICY: json.dumps(asdict(props.policy), sort_keys=True),
            serverless.ENV_TOPIC: props.alarm_topic.topic_arn,
        }
        self.function = lambda_.Function(
            self,
            "Function",
            # python3.14: a supported runtime (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtimes.html)
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler=serverless.HANDLER,
            code=lambda_.Code.from_asset(str(staged)),
            timeout=Duration.seconds(TIMEOUT_SEC),
            memory_size=MEMORY_MB,
            role=self.role,
            log_group=log_group,
            environment=environment,
            description=f"Supervisor of {instance.instance_id}: restarts its job within a budget",
        )
        function_resource = self.function.node.default_child
        policy = self.role.node.try_find_child("DefaultPolicy")
        policy_resource = policy.node.default_child if policy is not None else None
        if isinstance(function_resource, CfnResource) and isinstance(policy_resource, CfnResource):
            function_resource.add_override("DependsOn", [policy_resource.logical_id])
        self.schedule = events.Rule(
            self,
            "Schedule",
            description=f"Checks the job of {instance.instance_id}",
            schedule=events.Schedule.rate(Duration.minutes(instance.supervisor.check_minutes)),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0)],
        )


def _application_logical_id(stack: Stack, props: ServerlessSupervisorProps) -> str:
    """The application's logical ID, as cdk-nag renders the ARN's token."""
    found = stack.resolve(props.application_id)
    if isinstance(found, dict) and "Fn::GetAtt" in found:
        return str(found["Fn::GetAtt"][0])
    return str(found)
