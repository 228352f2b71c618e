"""A minimal stack of our own around JobDeployment, synthesized once.

It has what the construct needs from the real stack (an artifacts bucket, a data
bucket for the stop marker, a CfnCluster) and nothing else, so these tests do
not depend on the other constructs while they are being written. cdk-nag runs
on the synthesis: a finding on the construct's resources fails it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Acknowledgment, App, Environment, Stack, Validations
from aws_cdk import aws_emr as emr
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from emr.releases import DEFAULT_RELEASE_LABEL, RELEASES
from infra.constructs.job_deployment import JobDeployment, JobDeploymentProps
from model.config import JobConfig, KafkaOptions

REPO = Path(__file__).resolve().parents[2]
ACCOUNT, REGION, DOMAIN = "123456789012", "eu-west-1", "orders"
INSTANCE_ID = f"{DOMAIN}-{REGION}"


@dataclass(frozen=True)
class Synthesized:
    stack: Any
    job: Any
    cluster: Any
    template: dict[str, Any]
    outdir: Path
    source_root: Path


def source_root(tmp: Path) -> Path:
    """The repo's job/, model/, bootstrap/ and jvm/ (with the jar ``make
    install`` built, so staging does not compile again)."""
    root = tmp / "src"
    for package in ("job", "model"):
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO / package, root / package, ignore=ignore)
    shutil.copytree(REPO / "bootstrap", root / "bootstrap")
    shutil.copytree(REPO / "jvm", root / "jvm")
    if (REPO / "build" / "jvm").is_dir():
        shutil.copytree(REPO / "build" / "jvm", root / "build" / "jvm")
    return root


def build(root: Path, outdir: Path | None = None, **props: Any) -> tuple[Any, Any, Any, Any]:

    # An explicit outdir: CDK's default temporary one can vanish before the
    # test reads the staged assets.
    app = App(outdir=str(outdir or root.parent / "cdk.out"))
    stack = Stack(app, "DeployTest", env=Environment(account=ACCOUNT, region=REGION))
    logs = s3.Bucket(stack, "Logs", enforce_ssl=True)
    Validations.of(logs).acknowledge(Acknowledgment(id="AwsSolutions-S1", reason="log target"))
    artifacts = s3.Bucket(stack, "Artifacts", enforce_ssl=True, server_access_logs_bucket=logs)
    data = s3.Bucket(stack, "Data", enforce_ssl=True, server_access_logs_bucket=logs)
    config = JobConfig(
        instance_id=INSTANCE_ID,
        region=REGION,
        stream_name=f"streaming-{INSTANCE_ID}",
        database="streaming_orders_eu_west_1",
        checkpoint_location=data.s3_url_for_object("checkpoints/"),
        kafka=KafkaOptions(
            topic="streaming.orders.eu-west-1.failures",
            cluster_arn=f"arn:aws:kafka:{REGION}:{ACCOUNT}:cluster/c/0123-abcd",
            security="MSK_IAM",
        ),
        stop_marker_path=data.s3_url_for_object(f"control/{INSTANCE_ID}/stop"),
    )
    cluster = emr.CfnCluster(
        stack,
        "Cluster",
        name=f"Streaming-{INSTANCE_ID}",
        release_label=DEFAULT_RELEASE_LABEL,
        applications=[emr.CfnCluster.ApplicationProperty(name="Spark")],
        instances=emr.CfnCluster.JobFlowInstancesConfigProperty(
            keep_job_flow_alive_when_no_steps=True,
            master_instance_group=emr.CfnCluster.InstanceGroupConfigProperty(
                instance_count=1, instance_type="m5.xlarge"
            ),
            core_instance_group=emr.CfnCluster.InstanceGroupConfigProperty(
                instance_count=2, instance_type="m5.xlarge"
            ),
        ),
        job_flow_role="EMR_EC2_DefaultRole",
        service_role="EMR_DefaultRole",
    )
    for rule in (
        "AwsSolutions-EMR2",
        "AwsSolutions-EMR4",
        "AwsSolutions-EMR5",
        "AwsSolutions-EMR6",
    ):
        Validations.of(cluster).acknowledge(
            Acknowledgment(id=rule, reason="the real cluster is the emr_cluster construct's")
        )
    job = JobDeployment(
        stack,
        "Job",
        props=JobDeploymentProps(
            instance_id=INSTANCE_ID,
            artifacts_bucket=artifacts,
            job_config=config,
            python=RELEASES[DEFAULT_RELEASE_LABEL].pythons[0],
            source_root=root,
            **props,
        ),
    )
    job.attach(cluster)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stack, job, cluster


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    base = tmp_path_factory.mktemp("deploy")
    root = source_root(base)
    app, stack, job, cluster = build(root, base / "cdk.out")
    assembly = app.synth()  # raises on any unacknowledged cdk-nag finding
    template = assembly.get_stack_by_name(stack.stack_name).template
    yield Synthesized(stack, job, cluster, template, Path(assembly.directory), root)


def resolve_cfn(value: Any, refs: dict[str, str]) -> Any:
    """What CloudFormation does to Ref / Fn::Join, with made-up physical names."""
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return refs[value["Ref"]]
        if set(value) == {"Fn::Join"}:
            sep, parts = value["Fn::Join"]
            return sep.join(str(resolve_cfn(p, refs)) for p in parts)
        return {k: resolve_cfn(v, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_cfn(v, refs) for v in value]
    return value


def physical_names(template: dict[str, Any]) -> dict[str, str]:
    """Made-up physical ids for every resource (bucket names, the cluster id)."""
    names: dict[str, str] = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::S3::Bucket":
            names[logical_id] = f"bucket-{logical_id.lower()}"
        else:
            names[logical_id] = f"id-{logical_id}"
    return names
