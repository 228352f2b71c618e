"""The job of a ``"compute": "serverless"`` instance: an EMR Serverless
application of its own, an execution role, and the job run
(docs/serverless.md).

* ``AWS::EMRServerless::Application``: release ``emr.release_label``
  (emr-spark-8.1.0), ARM64 by default, no pre-initialized capacity, maximum
  capacity bounded to the driver plus the fixed executors (so the application
  holds one copy of the job and no scale-out), the instance's private subnets
  (the shared VPC where the instance uses it) and a security group of its own,
  CloudWatch logging into an encrypted log group with the instance's
  retention, and the ``spark-defaults`` of :mod:`infra.serverless.job_run`
  (model/spark_conf.py, the EMR cluster's source) in its runtime configuration
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-emrserverless-application.html).
* The execution role, trusted by ``emr-serverless.amazonaws.com`` for this
  account (the confused-deputy guard of
  https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/security-iam-runtime-role.html):
  the stack grants it exactly what it grants the EMR job role (its stream,
  buckets, database, topic, metrics: the owners' ``grant_job``); this
  construct adds reading the job's files under ``artifacts/`` and writing its
  log group.
* ``Custom::ServerlessJobRun`` (infra/serverless/job_run_handler.py): starts
  the run on create, hands over on every change of the job, stops it and then
  the application on delete (so that CloudFormation can delete the
  application). Its physical ID is stable; the run's ID is its ``JobRunId``
  attribute (the stack output :data:`JOB_RUN_OUTPUT`).
* ``Custom::ServerlessApplicationGuard`` (the same code): the application
  ``DependsOn`` it, so CloudFormation updates it first; when the application's
  configuration (:func:`config_hash`, also the application's tag) changes, it
  stops the job and the application, because UpdateApplication needs it
  CREATED or STOPPED; the job-run resource, whose ``ConfigHash`` changed too,
  starts the job again after the application's update. Its function finds the
  application by name: a reference to it would make a dependency cycle.

Network, by cost (docs/serverless.md, "Network"): S3 through the created
VPC's gateway endpoint (free); Kinesis, Glue, STS and CloudWatch through the
NAT, whose $0.045/GB costs less than an interface endpoint's ~$0.01 per AZ-hour
(three AZs: ~$22 a month per service, five services ~$110) below ~600 GB a
month per service; MSK is inside the VPC (its brokers admit the job's
security group).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from aws_cdk import (
    Acknowledgment,
    Aws,
    CfnResource,
    CfnTag,
    CustomResource,
    Duration,
    RemovalPolicy,
    Stack,
    Stage,
    Validations,
)
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_emrserverless as emrs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct, IDependable

from artifacts.packaging import PACKAGE_ZIP, REPO_ROOT, content_digest, stage_files
from artifacts.serverless_archive import ARCHIVE_FILE, archive_path, archive_spark_conf
from infra.config import InstanceConfig
from infra.constructs.instance import stack_output
from infra.constructs.job_deployment import JOB_PREFIX, JobDeployment
from infra.constructs.logs_key import encrypted_log_group, retention_days
from infra.constructs.roles import depend_on_policy_only, service_role
from infra.emr_step import stop_timeout_for
from infra.serverless.job_run import (
    LOG_TYPES,
    JobRunSpec,
    application_spark_defaults,
    restart_budget_split,
    start_job_run_request,
)
from infra.serverless.job_run_handler import (
    CONFIG_TAG,
    GUARD_TYPE,
    HANDLER,
    HANDLER_FILES,
    HANDLER_MODULE_FILE,
    HANDLER_SOURCES,
    JOB_RUN_TYPE,
)
from model import contract
from model.config import JobConfig
from model.lease import lease_path

DEPS_PREFIX: Final = "artifacts/deps"
# Where the archive is built for AWS (artifacts/serverless_archive.py).
TARGET_PLATFORM: Final = "aarch64"
# Lambda allows at most 900 s (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html).
LAMBDA_MAX_SEC: Final = 900
CANCEL_TIMEOUT_SEC: Final = 120
# StartJobRun, the S3 calls and the reply after the two waits.
HANDLER_SLACK_SEC: Final = 60
AUTO_STOP_IDLE_MINUTES: Final = 15  # the service's default (app-behavior page)
JOB_RUN_OUTPUT: Final = "ServerlessJobRun"
APPLICATION_OUTPUT: Final = "ServerlessApplicationId"
# How long CloudFormation waits for a custom resource's reply before it fails
# the operation (1-3600 s; the default is 3600:
# https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-cloudformation-customresource.html,
# ServiceTimeout): the function's own timeout plus a minute for the reply, so
# a handler that died without replying fails the deploy in 16 minutes, not 60.
SERVICE_TIMEOUT_SEC: Final = LAMBDA_MAX_SEC + 60
# The job's log group, as EMR Serverless writes it with the job runtime role
# (UG "Logging for EMR Serverless with Amazon CloudWatch",
# https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/logging.html#jobs-log-storage-cw;
# its example policy could not be read from here): the stream actions on the
# job's own log group, and DescribeLogGroups on every log group of the account
# and Region. The CloudWatch Logs guide says that DescribeLogGroups is granted
# on a wildcard log-group ARN (``arn:aws:logs:<region>:<account>:log-group:*``),
# never on a single group's
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/AWS-logs-infrastructure-CWL.html,
# "User permissions").
LOG_GROUP_ACTIONS: Final = ("logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents")
PENDING_RUN_FILE: Final = "pending-run.json"


def config_hash(configuration: object) -> str:
    """The application's configuration (resolved template values) as a short
    hash: the application's tag and both custom resources' ``ConfigHash``."""
    return hashlib.sha256(json.dumps(configuration, sort_keys=True).encode()).hexdigest()[:16]


def pending_run_path(stop_marker: str) -> str:
    """Where the handler keeps a request to start after a rollback: beside
    the stop marker (the instance's control prefix)."""
    return f"{stop_marker.rsplit('/', 1)[0]}/{PENDING_RUN_FILE}"


def handover_timeout(graceful_stop_timeout_sec: int) -> int:
    """The run's graceful stop bound, as the EMR launcher's
    (``emr_step.stop_timeout_for``: the job's own bound plus teardown); the
    function refuses, at synth, one that cannot fit Lambda's 15 minutes."""
    wait = stop_timeout_for(graceful_stop_timeout_sec)
    most = (
        LAMBDA_MAX_SEC - CANCEL_TIMEOUT_SEC - HANDLER_SLACK_SEC - (wait - graceful_stop_timeout_sec)
    )
    if graceful_stop_timeout_sec > most:
        raise ValueError(
            f"job.graceful_stop_timeout_sec: {graceful_stop_timeout_sec}; allowed on "
            f'"compute": "serverless": at most {most} (the job run\'s handover must fit '
            "one 15-minute Lambda invocation)"
        )
    return wait


def maximum_capacity(instance: InstanceConfig) -> dict[str, str]:
    """The driver plus the fixed executors, in the API's units."""
    shape = instance.serverless
    return {
        "cpu": f"{shape.max_vcpu} vCPU",
        "memory": f"{shape.max_memory_gb} GB",
        "disk": f"{shape.max_disk_gb} GB",
    }


@dataclass(frozen=True)
class ServerlessJobProps:
    instance: InstanceConfig
    job_config: JobConfig
    vpc: ec2.IVpc
    subnets: tuple[ec2.ISubnet, ...]
    artifacts_bucket: s3.IBucket
    data_bucket: s3.IBucket
    job: JobDeployment
    removal_policy: RemovalPolicy
    source_root: Path = REPO_ROOT


class ServerlessJob(Construct):
    """Exposes ``security_group``, ``log_group``, ``execution_role``,
    ``application``, ``application_id``, ``spec``, ``request`` (the
    StartJobRun body), ``archive_upload`` and, after :meth:`start`, ``job_run``."""

    def __init__(self, scope: Construct, construct_id: str, *, props: ServerlessJobProps) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        instance = props.instance
        shape = instance.serverless
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=props.vpc,
            description=f"EMR Serverless job of {instance.instance_id} (egress only)",
            allow_all_outbound=True,
        )
        self.log_group = encrypted_log_group(
            self,
            "Logs",
            what=f"the EMR Serverless job of {instance.instance_id}",
            retention=retention_days(shape.log_retention_days),
            removal_policy=props.removal_policy,
        )
        self.execution_role = service_role(
            self,
            "ExecutionRole",
            "emr-serverless.amazonaws.com",
            f"EMR Serverless job run of streaming instance {instance.instance_id}",
        )
        self._grant_runtime(props)
        configuration = dict(
            name=contract.app_name(instance.instance_id),
            release_label=instance.emr.release_label,
            type="Spark",
            architecture=shape.architecture,
            auto_start_configuration=emrs.CfnApplication.AutoStartConfigurationProperty(
                enabled=True
            ),
            auto_stop_configuration=emrs.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=AUTO_STOP_IDLE_MINUTES
            ),
            maximum_capacity=emrs.CfnApplication.MaximumAllowedResourcesProperty(
                **maximum_capacity(instance)
            ),
            network_configuration=emrs.CfnApplication.NetworkConfigurationProperty(
                subnet_ids=[subnet.subnet_id for subnet in props.subnets],
                security_group_ids=[self.security_group.security_group_id],
            ),
            monitoring_configuration=emrs.CfnApplication.MonitoringConfigurationProperty(
                cloud_watch_logging_configuration=emrs.CfnApplication.CloudWatchLoggingConfigurationProperty(
                    enabled=True,
                    log_group_name=self.log_group.log_group_name,
                    log_type_map=[
                        emrs.CfnApplication.LogTypeMapKeyValuePairProperty(key=kind, value=types)
                        for kind, types in LOG_TYPES.items()
                    ],
                )
            ),
            runtime_configuration=[
                emrs.CfnApplication.ConfigurationObjectProperty(
                    classification="spark-defaults",
                    properties=application_spark_defaults(shape, instance.shuffle_partitions),
                )
            ],
        )
        self.config_hash = config_hash(Stack.of(self).resolve(configuration))
        self.stop_timeout_sec = handover_timeout(props.job_config.graceful_stop_timeout_sec)
        self._guard = self._application_guard()
        self.application = emrs.CfnApplication(
            self,
            "Application",
            tags=[CfnTag(key=CONFIG_TAG, value=self.config_hash)],
            **configuration,  # type: ignore[arg-type]
        )
        # CloudFormation updates the guard first: it stops the job and the
        # application so that UpdateApplication is allowed.
        self.application.node.add_dependency(self._guard)
        self.application_id = self.application.attr_application_id
        stack_output(self, APPLICATION_OUTPUT, self.application_id, "EMR Serverless application")
        self.archive_upload, archive_uri = self._upload_archive(props)
        service_attempts, _ = restart_budget_split(instance.supervisor.max_restarts_per_hour)
        package_uri = (
            f"s3://{props.artifacts_bucket.bucket_name}/{JOB_PREFIX}/{props.job.package_version}"
        )
        unnamed = JobRunSpec(
            application_id=self.application_id,
            execution_role_arn=self.execution_role.role_arn,
            name="-",
            package_uri=package_uri,
            max_failed_attempts_per_hour=service_attempts,
            log_group_name=self.log_group.log_group_name,
            # app.zip unpacked beside the dependencies, on PYTHONPATH too:
            # the Python streaming source's planner does not see --py-files
            # (artifacts/serverless_archive.archive_spark_conf).
            archive_conf=archive_spark_conf(
                archive_uri, shape.python, package_zip_uri=f"{package_uri}/{PACKAGE_ZIP}"
            ),
        )
        # A name unique per request: the delete of a replaced request (after an
        # update) finds only its own runs by it (the handler's docstring).
        digest = hashlib.sha256(
            json.dumps(
                Stack.of(self).resolve(start_job_run_request(unnamed)), sort_keys=True
            ).encode()
        ).hexdigest()[:12]
        self.spec = replace(unnamed, name=f"{contract.app_name(instance.instance_id)}-{digest}")
        self.request = start_job_run_request(self.spec)
        self.job_run: CustomResource | None = None

    def _grant_runtime(self, props: ServerlessJobProps) -> None:
        """What the run needs beyond the job's own grants: its files (the
        package, the jar, the archive: ``artifacts/`` of the instance's own
        artifacts bucket) and its log group."""
        artifacts = props.artifacts_bucket
        self.execution_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadJobFiles",
                actions=["s3:GetObject"],
                resources=[artifacts.arn_for_objects("artifacts/*")],
            )
        )
        self.execution_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogGroup",
                actions=list(LOG_GROUP_ACTIONS),
                # The log group's ARN attribute ends in ":*": its streams too.
                resources=[self.log_group.log_group_arn],
            )
        )
        self.execution_role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DescribeLogGroups",
                actions=["logs:DescribeLogGroups"],
                resources=[f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:*"],
            )
        )
        Validations.of(self.execution_role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::<ArtifactsBucket.Arn>/artifacts/*]",
                reason="The job run reads its code, jar, config and dependency archive under "
                "artifacts/ of this instance's own artifacts bucket; names carry content hashes.",
            ),
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:"
                "<AWS::AccountId>:log-group:*]",
                reason="logs:DescribeLogGroups is granted on the wildcard log-group ARN, never "
                "on one group (CloudWatch Logs guide, AWS-logs-infrastructure-CWL.html).",
            ),
        )

    def _upload_archive(self, props: ServerlessJobProps) -> tuple[s3deploy.BucketDeployment, str]:
        """The Python dependency archive, under a prefix named by its content."""
        archive = archive_path(TARGET_PLATFORM)
        digest = content_digest({ARCHIVE_FILE: archive.read_bytes()})
        stage = Path(Stage.of(self).outdir) / f"serverless-deps-{digest}"  # type: ignore[union-attr]
        if not (stage / ARCHIVE_FILE).is_file():
            stage.mkdir(parents=True, exist_ok=True)
            try:
                os.link(archive, stage / ARCHIVE_FILE)
            except OSError:
                shutil.copyfile(archive, stage / ARCHIVE_FILE)
        prefix = f"{DEPS_PREFIX}/{digest}"
        access = props.job.handler_access
        upload = s3deploy.BucketDeployment(
            self,
            "ArchiveUpload",
            sources=[s3deploy.Source.asset(str(stage))],
            destination_bucket=props.artifacts_bucket,
            destination_key_prefix=f"{prefix}/",
            prune=False,
            role=access.role,
            log_group=access.log_group,
        )
        return upload, f"s3://{props.artifacts_bucket.bucket_name}/{prefix}/{ARCHIVE_FILE}"

    def _handover(self) -> dict[str, object]:
        """Both resources' ``Handover`` property."""
        job_config = self._props.job_config
        stop_marker = job_config.stop_marker_path
        if stop_marker is None:
            raise ValueError("job_config.stop_marker_path: None; the handover writes it")
        return {
            "LeaseUri": lease_path(job_config.checkpoint_location),
            "StopMarkerUri": stop_marker,
            "PendingRunUri": pending_run_path(stop_marker),
            "StopTimeoutSec": self.stop_timeout_sec,
            "CancelTimeoutSec": CANCEL_TIMEOUT_SEC,
        }

    def _application_guard(self) -> CfnResource:
        """``Custom::ServerlessApplicationGuard`` (module docstring). Its role
        cannot name the application (the application depends on it): it gets
        the application actions on the account's applications in the Region,
        and ListApplications (no resource type) on ``*``."""
        instance = self._props.instance
        function = self._function(
            "Guard",
            f"Stops the job of {instance.instance_id} around an update of its application",
        )
        role = function.role
        assert isinstance(role, iam.Role)
        applications = (
            f"arn:{Aws.PARTITION}:emr-serverless:{Aws.REGION}:{Aws.ACCOUNT_ID}:/applications/*"
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="FindOwnApplicationByName",
                actions=["emr-serverless:ListApplications"],
                resources=["*"],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="StopAndRestartOwnApplication",
                actions=[
                    f"emr-serverless:{action}"
                    for action in (
                        "GetApplication",
                        "StopApplication",
                        "ListJobRuns",
                        "GetJobRun",
                        "CancelJobRun",
                        "StartJobRun",
                    )
                ],
                resources=[applications, f"{applications}/jobruns/*"],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PassExecutionRole",
                actions=["iam:PassRole"],
                resources=[self.execution_role.role_arn],
                conditions={
                    "StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}
                },
            )
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::*]",
                reason="ListApplications has no resource type: the guard finds the instance's "
                "application by its name.",
            ),
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:emr-serverless:"
                "<AWS::Region>:<AWS::AccountId>:/applications/*]",
                reason="The guard runs before the application it stops exists or changes; "
                "naming it would be a dependency cycle.",
            ),
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:emr-serverless:"
                "<AWS::Region>:<AWS::AccountId>:/applications/*/jobruns/*]",
                reason="The job runs of the instance's application, found by its name.",
            ),
        )
        guard = self._served_by(
            function,
            "ApplicationGuard",
            GUARD_TYPE,
            {
                "ApplicationName": contract.app_name(instance.instance_id),
                "ConfigHash": self.config_hash,
                "Handover": self._handover(),
            },
        )
        resource = guard.node.default_child
        assert isinstance(resource, CfnResource)
        return resource

    def start(self, *, after: tuple[IDependable, ...] = ()) -> CustomResource:
        """The job run: waits for the job's files, the archive, the role's
        policies and ``after`` (what the job uses that the request does not
        reference)."""
        if self.job_run is not None:
            raise ValueError("start: already started; allowed: one job run per instance")
        props = self._props
        function = self._function(
            "JobRun", f"Starts and hands over the job run of {props.instance.instance_id}"
        )
        role = function.role
        assert isinstance(role, iam.Role)
        grant_job_runs(
            role,
            application_id=self.application_id,
            execution_role_arn=self.execution_role.role_arn,
            sid="RunsOfOwnApplication",
            actions=(
                "StartJobRun",
                "ListJobRuns",
                "GetJobRun",
                "CancelJobRun",
                # The run's owner tag on StartJobRun (API StartJobRun ``tags``).
                "TagResource",
                # Delete: stop the application so that CloudFormation can delete it.
                "GetApplication",
                "StopApplication",
            ),
        )
        self.job_run = self._served_by(
            function,
            "JobRun",
            JOB_RUN_TYPE,
            {
                "StartJobRun": self.request,
                "Handover": self._handover(),
                "ConfigHash": self.config_hash,
            },
        )
        # The application is referenced (GetAtt) already: no DependsOn on it (cfn-lint W3005).
        self.job_run.node.add_dependency(props.job.package_upload, self.archive_upload, *after)
        stack_output(
            self,
            JOB_RUN_OUTPUT,
            self.job_run.get_att_string("JobRunId"),
            "EMR Serverless job run started by the stack's last deploy",
        )
        return self.job_run

    def _served_by(
        self,
        function: lambda_.Function,
        resource_id: str,
        resource_type: str,
        properties: dict[str, Any],
    ) -> CustomResource:
        """A resource of ``function``'s: CloudFormation gives up on its reply
        only after the function itself must have ended (SERVICE_TIMEOUT_SEC)."""
        return CustomResource(
            self,
            resource_id,
            service_token=function.function_arn,
            resource_type=resource_type,
            service_timeout=Duration.seconds(SERVICE_TIMEOUT_SEC),
            properties=properties,
        )

    def _function(self, name: str, description: str) -> lambda_.Function:
        """The handler's function (both resource types), with its log group, and
        a role that reads the lease and writes the stop marker and the pending
        request."""
        props = self._props
        instance = props.instance
        job_config = props.job_config
        handover = self._handover()
        log_group = encrypted_log_group(
            self,
            f"{name}Logs",
            what=f"the {name} resource of {instance.instance_id}",
            retention=retention_days(instance.retention.function_log_days),
            removal_policy=props.removal_policy,
        )
        role = iam.Role(
            self,
            f"{name}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=description,
        )
        log_group.grant_write(role)
        bucket = props.data_bucket
        lease_key = _key(lease_path(job_config.checkpoint_location))
        marker_key = _key(str(handover["StopMarkerUri"]))
        pending_key = _key(str(handover["PendingRunUri"]))
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadLeaseAndPendingRun",
                actions=["s3:GetObject"],
                resources=[bucket.arn_for_objects(lease_key), bucket.arn_for_objects(pending_key)],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteStopMarkerAndPendingRun",
                actions=["s3:PutObject", "s3:DeleteObject"],
                resources=[
                    bucket.arn_for_objects(marker_key),
                    bucket.arn_for_objects(pending_key),
                ],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ListLeaseByExactPrefix",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringEquals": {"s3:prefix": [lease_key, pending_key]}},
            )
        )
        staged = stage_handler(props.source_root, Path(Stage.of(self).outdir))  # type: ignore[union-attr]
        function = lambda_.Function(
            self,
            f"{name}Function",
            # python3.14: a supported runtime (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtimes.html)
            runtime=lambda_.Runtime.PYTHON_3_14,
            handler=HANDLER,
            code=lambda_.Code.from_asset(str(staged)),
            timeout=Duration.seconds(LAMBDA_MAX_SEC),
            memory_size=256,
            role=role,
            log_group=log_group,
            # The handler's path inside the asset (HANDLER_MODULE_FILE), as the
            # deployed description has always named it.
            description=f"{description} ({HANDLER_MODULE_FILE})",
        )
        depend_on_policy_only(function, role)
        return function


def grant_job_runs(
    role: iam.Role,
    *,
    application_id: str,
    execution_role_arn: str,
    sid: str,
    actions: tuple[str, ...],
) -> None:
    """``emr-serverless:<actions>`` on the application ``application_id`` and
    its job runs (resource types ``applicationId`` and ``jobRunId``,
    https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonemrserverless.html),
    and ``iam:PassRole`` of ``execution_role_arn`` to EMR Serverless only:
    what starting the stack's request needs. Used by the job-run resource and
    the supervisor (infra/supervisor/construct.py)."""
    application_arn = (
        f"arn:{Aws.PARTITION}:emr-serverless:{Aws.REGION}:{Aws.ACCOUNT_ID}:"
        f"/applications/{application_id}"
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid=sid,
            actions=[f"emr-serverless:{action}" for action in actions],
            resources=[application_arn, f"{application_arn}/jobruns/*"],
        )
    )
    role.add_to_principal_policy(
        iam.PolicyStatement(
            sid="PassExecutionRole",
            actions=["iam:PassRole"],
            resources=[execution_role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}},
        )
    )
    # cdk-nag renders the application's ID as <LogicalId.ApplicationId>.
    found = Stack.of(role).resolve(application_id)
    logical_id = found["Fn::GetAtt"][0] if isinstance(found, dict) else found
    Validations.of(role).acknowledge(
        Acknowledgment(
            id="AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:emr-serverless:<AWS::Region>:"
            f"<AWS::AccountId>:/applications/<{logical_id}.ApplicationId>/jobruns/*]",
            reason="The job runs of this instance's own application: their IDs are made "
            "when they start.",
        )
    )


def _key(uri: str) -> str:
    return uri.split("/", 3)[3]


def stage_handler(root: Path, stage_dir: Path) -> Path:
    """Copy :data:`HANDLER_FILES` under ``stage_dir`` by content hash, the
    handler itself from its place in the repository (:data:`HANDLER_SOURCES`)."""
    return stage_files(
        root, stage_dir, "serverless-job-run", HANDLER_FILES, sources=HANDLER_SOURCES
    )
