"""Ships the job to the instance's cluster: uploads, bootstrap actions, config, step.

``cdk deploy`` alone leaves a cluster running the job: the job package, the
locked dependency lists, the bootstrap scripts and the per-instance job config
are built at synth time (:mod:`artifacts.packaging`: offline, deterministic bytes)
and uploaded to the instance's artifacts bucket; the cluster's bootstrap actions install the locked
Python packages and the pinned jars on every node; the EMR step (built by
:func:`infra.emr_step.build_step`, the same function ``make redeploy`` uses)
starts the job.

Two content-addressed prefixes, because the cluster and the job change at
different speeds:

* ``artifacts/bootstrap/<hash>/``: scripts and locks. The cluster's
  ``BootstrapActions`` point here, and changing them replaces the cluster in
  CloudFormation, so only a change of the scripts or locks moves this prefix.
* ``artifacts/job/<hash>/``: ``app.zip``, ``main.py``, ``job-config.json``. A
  new job version gets a new prefix and a new step; the running version keeps
  its files (YARN refuses to localize a file that changed under it).

Wiring (the cluster needs the bootstrap actions, the step needs the cluster)::

    job = JobDeployment(self, "Job", props=JobDeploymentProps(...))
    job.attach(emr.cluster)   # sets BootstrapActions, orders uploads, adds the step
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aws_cdk import (
    Acknowledgment,
    CfnOutput,
    CfnResource,
    RemovalPolicy,
    Stack,
    Stage,
    Token,
    Validations,
)
from aws_cdk import aws_emr as emr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from constructs import Construct, IDependable

from artifacts.packaging import (
    BOOTSTRAP_LIB,
    JOB_CONFIG_FILE,
    REPO_ROOT,
    stage_bootstrap,
    stage_package,
)
from infra.config import InstanceConfig
from infra.config_sections import RetentionConfig
from infra.constructs.helper_lambdas import DeploymentHandlerAccess
from infra.constructs.instance import removal_policy
from infra.emr_step import (
    CLUSTER_ID_OUTPUT,
    JARS_DIR,
    STEP_SPEC_OUTPUT,
    LockedJar,
    StepSpec,
    build_step,
    read_jar_lock,
    stop_timeout_for,
)
from model import contract
from model.config import JobConfig

MAVEN_CENTRAL: Final = "https://repo1.maven.org/maven2"
# The Jackson jars whose checksums are verified (pyspark wheel). The CBOR
# dataformat jar is locked too but only selected by an instance whose Kinesis
# client needs it (and then needs a verified checksum or an explicit opt-in).
DEFAULT_JARS: Final = (
    "jackson-core",
    "jackson-databind",
    "jackson-annotations",
    "jackson-datatype-jsr310",
)
BOOTSTRAP_PREFIX: Final = "artifacts/bootstrap"
JOB_PREFIX: Final = "artifacts/job"


@dataclass(frozen=True)
class JobDeploymentProps:
    """``job_config`` is the instance's JobConfig (``infra.job_config``); its
    string fields may hold CDK tokens (bucket names) and are resolved at deploy.
    ``jar_repository`` is where nodes download the pinned jars: Maven Central,
    or ``s3://bucket/prefix`` / an internal mirror for private subnets.
    ``stop_timeout_sec`` bounds the handover wait; by default the job's own
    ``graceful_stop_timeout_sec`` plus YARN's teardown (``emr_step.stop_timeout_for``)."""

    instance_id: str
    artifacts_bucket: s3.IBucket
    job_config: JobConfig
    # The job's interpreter on the nodes: the instance's ``emr.job_python``
    # (one the release ships, emr/releases.py).
    python: str
    jar_artifacts: tuple[str, ...] = DEFAULT_JARS
    jar_repository: str = MAVEN_CENTRAL
    allow_unverified_jars: bool = False
    disable_cbor: bool = False
    stop_timeout_sec: int | None = None
    pip_index_url: str | None = None
    source_root: Path = REPO_ROOT
    # Of the upload handler's log group and its key (docs/infra.md, removal_policy).
    removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    # The upload handler's log retention: the instance's retention.function_log_days.
    handler_log_days: int = RetentionConfig().function_log_days

    @classmethod
    def of(
        cls, instance: InstanceConfig, artifacts_bucket: s3.IBucket, job_config: JobConfig
    ) -> JobDeploymentProps:
        """The instance's job, on the interpreter its release ships."""
        return cls(
            instance_id=instance.instance_id,
            artifacts_bucket=artifacts_bucket,
            job_config=job_config,
            python=instance.emr.job_python,
            removal_policy=removal_policy(instance),
            handler_log_days=instance.retention.function_log_days,
        )


class JobDeployment(Construct):
    """Exposes ``bootstrap_actions``, ``step_spec``, ``step`` (after :meth:`attach`),
    ``bootstrap_upload``, ``package_upload``, ``package_version``, ``jars``."""

    def __init__(self, scope: Construct, construct_id: str, *, props: JobDeploymentProps) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        root = props.source_root
        self.jars = select_jars(
            read_jar_lock(root / "bootstrap" / "jars.lock"),
            props.jar_artifacts,
            allow_unverified=props.allow_unverified_jars,
        )
        stop_marker = props.job_config.stop_marker_path
        if stop_marker is None:
            raise ValueError(
                "job_config.stop_marker_path: None; allowed: an s3:// URI the job polls, "
                "so a new version can stop the running one gracefully"
            )
        stage_dir = Path(Stage.of(self).outdir)  # type: ignore[union-attr]
        bucket = props.artifacts_bucket
        # Both uploads share CDK's one handler: the same role and log group.
        self.handler_access = DeploymentHandlerAccess(
            self,
            "UploadHandler",
            removal_policy=props.removal_policy,
            log_days=props.handler_log_days,
        )
        handler = {"role": self.handler_access.role, "log_group": self.handler_access.log_group}

        bootstrap_dir, bootstrap_hash = stage_bootstrap(root, stage_dir)
        bootstrap_uri = f"s3://{bucket.bucket_name}/{BOOTSTRAP_PREFIX}/{bootstrap_hash}"
        self.bootstrap_upload = s3deploy.BucketDeployment(
            self,
            "BootstrapUpload",
            sources=[s3deploy.Source.asset(str(bootstrap_dir))],
            destination_bucket=bucket,
            destination_key_prefix=f"{BOOTSTRAP_PREFIX}/{bootstrap_hash}/",
            prune=False,
            **handler,  # type: ignore[arg-type]
        )

        # JSON round trip: tuples become lists, which jsii can pass to CDK.
        config_dict = json.loads(json.dumps(props.job_config.to_dict()))
        config_json = Stack.of(self).resolve(config_dict)
        package_dir, self.package_version = stage_package(
            root, stage_dir, json.dumps(config_json, sort_keys=True)
        )
        self.package_upload = s3deploy.BucketDeployment(
            self,
            "PackageUpload",
            sources=[
                s3deploy.Source.asset(str(package_dir)),
                s3deploy.Source.json_data(JOB_CONFIG_FILE, config_dict),
            ],
            destination_bucket=bucket,
            destination_key_prefix=f"{JOB_PREFIX}/{self.package_version}/",
            prune=False,
            **handler,  # type: ignore[arg-type]
        )
        _acknowledge_deployment_handler(bucket, self.handler_access.role)

        self.bootstrap_actions = bootstrap_actions(
            props, bootstrap_uri=bootstrap_uri, jars=self.jars
        )
        self.step_spec = StepSpec(
            step_name=f"streaming-{props.instance_id}-{self.package_version}",
            app_name=contract.app_name(props.instance_id),
            package_uri=f"s3://{bucket.bucket_name}/{JOB_PREFIX}/{self.package_version}",
            stop_marker_uri=stop_marker,
            jar_files=tuple(jar.file_name for jar in self.jars),
            checkpoint_uri=props.job_config.checkpoint_location,
            python=props.python,
            jars_dir=JARS_DIR,
            disable_cbor=props.disable_cbor,
            stop_timeout_sec=(
                props.stop_timeout_sec
                or stop_timeout_for(props.job_config.graceful_stop_timeout_sec)
            ),
        )
        self.step: emr.CfnStep | None = None

    def attach(self, cluster: emr.CfnCluster, *, after: Sequence[IDependable] = ()) -> emr.CfnStep:
        """Give ``cluster`` the bootstrap actions and submit the job step to it.

        The cluster waits for the bootstrap upload (its nodes run the scripts at
        boot); the step waits for the package upload (spark-submit reads it)
        and for ``after``: what the job needs at start that the step does not
        reference (CloudFormation orders resources only by references and
        ``DependsOn``,
        https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html).
        """
        if self.step is not None:
            raise ValueError("attach: already attached; allowed: one cluster per deployment")
        cluster.bootstrap_actions = list(self.bootstrap_actions)
        cluster.node.add_dependency(self.bootstrap_upload)
        definition = build_step(self.step_spec)
        jar_step = definition["HadoopJarStep"]
        self.step = emr.CfnStep(
            self,
            "Step",
            job_flow_id=cluster.ref,
            name=definition["Name"],
            action_on_failure=definition["ActionOnFailure"],
            hadoop_jar_step=emr.CfnStep.HadoopJarStepConfigProperty(
                jar=jar_step["Jar"], args=list(jar_step["Args"])
            ),
        )
        self.step.node.add_dependency(self.package_upload, *after)
        # What `make redeploy` reads back to submit exactly this step again.
        spec_output = CfnOutput(
            self,
            STEP_SPEC_OUTPUT,
            value=Stack.of(self).to_json_string(self.step_spec.to_dict()),
            description="StepSpec of the job step (scripts/redeploy.py rebuilds the step from it)",
        )
        spec_output.override_logical_id(STEP_SPEC_OUTPUT)
        cluster_output = CfnOutput(
            self, CLUSTER_ID_OUTPUT, value=cluster.ref, description="EMR cluster running the job"
        )
        cluster_output.override_logical_id(CLUSTER_ID_OUTPUT)
        return self.step


def select_jars(
    locked: tuple[LockedJar, ...], artifacts: tuple[str, ...], *, allow_unverified: bool
) -> tuple[LockedJar, ...]:
    """The lock entries to install, refusing at synth what the bootstrap would refuse."""
    by_name = {jar.artifact: jar for jar in locked}
    if not artifacts:
        raise ValueError("jar_artifacts: empty; allowed: artifactIds from bootstrap/jars.lock")
    chosen: list[LockedJar] = []
    for name in artifacts:
        if name not in by_name:
            raise ValueError(
                f"jar_artifacts: {name!r} is not in bootstrap/jars.lock; "
                f"allowed: {', '.join(sorted(by_name))}"
            )
        jar = by_name[name]
        if jar.sha256 is None and not allow_unverified:
            raise ValueError(
                f"jar_artifacts: {name!r} has an UNVERIFIED checksum in bootstrap/jars.lock; "
                "pin its SHA-256 (docs/deploy.md) or set allow_unverified_jars=True"
            )
        chosen.append(jar)
    return tuple(chosen)


def bootstrap_actions(
    props: JobDeploymentProps, *, bootstrap_uri: str, jars: tuple[LockedJar, ...]
) -> tuple[emr.CfnCluster.BootstrapActionConfigProperty, ...]:
    """The cluster's two bootstrap actions for ``props`` (its interpreter, jar
    repository and pip index), every URI under ``bootstrap_uri``.

    EMR downloads each action's script alone, so each is told first where the
    shared shell library is (``--lib``), in the same content-addressed prefix:
    a script never runs with a library of another version."""
    lib_args = ["--lib", f"{bootstrap_uri}/{BOOTSTRAP_LIB}"]
    python_args = [
        *lib_args,
        "--requirements",
        f"{bootstrap_uri}/requirements.lock",
        "--python",
        props.python,
    ]
    if props.pip_index_url is not None:
        python_args += ["--index-url", props.pip_index_url]
    jar_args = [
        *lib_args,
        "--lock",
        f"{bootstrap_uri}/jars.lock",
        "--repo",
        props.jar_repository,
        "--dest",
        JARS_DIR,
        "--only",
        ",".join(jar.artifact for jar in jars),
        "--launcher",
        f"{bootstrap_uri}/streaming-spark-submit.sh",
    ]
    if props.allow_unverified_jars:
        jar_args.append("--allow-unverified")
    return (
        _action("install-python-deps", f"{bootstrap_uri}/install_python_deps.sh", python_args),
        _action("install-pinned-jars", f"{bootstrap_uri}/install_jars.sh", jar_args),
    )


def _action(name: str, path: str, args: list[str]) -> emr.CfnCluster.BootstrapActionConfigProperty:
    return emr.CfnCluster.BootstrapActionConfigProperty(
        name=name,
        script_bootstrap_action=emr.CfnCluster.ScriptBootstrapActionConfigProperty(
            path=path, args=args
        ),
    )


def _acknowledge_deployment_handler(bucket: s3.IBucket, role: iam.IRole) -> None:
    """The uploads' handler is CDK's singleton Lambda (one per stack); it runs
    as ``role`` (helper_lambdas.DeploymentHandlerAccess: no managed policy, its
    own log group only), to which CDK's BucketDeployment adds its S3 grants.
    Each acknowledgment names one finding and says what the grant really allows."""
    stack = Stack.of(bucket)
    handler = next(
        (c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment")),
        None,
    )
    if handler is None:
        raise ValueError("no BucketDeployment handler in the stack; allowed: call after uploads")
    account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
    region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
    Validations.of(handler).acknowledge(
        Acknowledgment(
            id="AwsSolutions-L1",
            reason="The BucketDeployment handler's runtime is chosen and kept current by "
            "aws-cdk-lib, not by this product; upgrading aws-cdk-lib upgrades it.",
        )
    )
    findings = [
        (
            f"AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:s3:::cdk-hnb659fds-assets-"
            f"{account}-{region}/*]",
            "CDK's grant: the handler may read every object of the CDK asset staging bucket "
            "(it reads this stack's asset zips from it).",
        ),
    ]
    cfn = bucket.node.default_child
    if isinstance(cfn, s3.CfnBucket):
        logical_id = stack.resolve(cfn.logical_id)
        findings.append(
            (
                f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/*]",
                "CDK's grant_read_write: the handler may read, write and delete any object "
                "(and object version) of this instance's artifacts bucket, emr-logs/ "
                "included; it writes under artifacts/ and, with prune off, deletes nothing.",
            )
        )
    for action, what in (
        ("s3:GetObject*", "reads objects, their versions, tags and ACLs"),
        ("s3:GetBucket*", "reads the buckets' settings (location, policy, versioning...)"),
        ("s3:List*", "lists the whole asset bucket and artifacts bucket"),
        ("s3:DeleteObject*", "may delete objects and object versions of the artifacts bucket"),
        ("s3:Abort*", "aborts multipart uploads"),
    ):
        findings.append(
            (
                f"AwsSolutions-IAM5[Action::{action}]",
                f"CDK's BucketDeployment grant uses {action}: the handler {what}, on the CDK "
                "asset bucket and this instance's artifacts bucket only.",
            )
        )
    for finding, reason in findings:
        Validations.of(role).acknowledge(Acknowledgment(id=finding, reason=reason))
    # cfn-lint W3005: CDK renders both DependsOn and GetAtt on the handler's role.
    # Harmless (GetAtt already orders them) and not ours to change.
    function = handler.node.default_child
    if isinstance(function, CfnResource):
        function.add_metadata("cfn-lint", {"config": {"ignore_checks": ["W3005"]}})
