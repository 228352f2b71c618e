"""scripts/redeploy.py against moto server's EMR and CloudFormation.

The cluster is created with run_job_flow from the synthesized cluster definition
(its bootstrap actions included), the stack outputs are the synthesized ones
resolved to physical names, and the command must submit exactly the step that
infra/emr_step.build_step makes from the output spec (moto never runs steps, so
they stay RUNNING, which is how the bounded wait is tested).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from infra.emr_step import StepSpec, build_step
from local.emulators import Endpoints
from model import contract
from scripts import redeploy
from scripts.command import OperatorError
from tests.deploy.conftest import (
    DOMAIN,
    INSTANCE_ID,
    REGION,
    REPO,
    Synthesized,
    physical_names,
    resolve_cfn,
)

pytestmark = pytest.mark.synth


@dataclass(frozen=True)
class Deployed:
    cluster_id: str
    spec: StepSpec
    synthesized_actions: list[dict[str, Any]]


def client(endpoints: Endpoints, name: str) -> Any:
    return boto3.client(name, region_name=REGION, endpoint_url=endpoints.aws_url)


def run_job_flow_from(cluster: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """The synthesized AWS::EMR::Cluster as run_job_flow arguments."""
    props = resolve_cfn(cluster["Properties"], names)
    instances = props["Instances"]
    master, core = instances["MasterInstanceGroup"], instances["CoreInstanceGroup"]
    return {
        "Name": props["Name"],
        "ReleaseLabel": props["ReleaseLabel"],
        "Applications": props["Applications"],
        "BootstrapActions": props["BootstrapActions"],
        "Instances": {
            "MasterInstanceType": master["InstanceType"],
            "SlaveInstanceType": core["InstanceType"],
            "InstanceCount": master["InstanceCount"] + core["InstanceCount"],
            "KeepJobFlowAliveWhenNoSteps": instances["KeepJobFlowAliveWhenNoSteps"],
        },
        "JobFlowRole": props["JobFlowRole"],
        "ServiceRole": props["ServiceRole"],
    }


@pytest.fixture
def deployed(synthesized: Synthesized, endpoints: Endpoints) -> Iterator[Deployed]:
    template = synthesized.template
    names = physical_names(template)
    (cluster_logical_id,) = (
        k for k, r in template["Resources"].items() if r["Type"] == "AWS::EMR::Cluster"
    )
    emr, cfn = client(endpoints, "emr"), client(endpoints, "cloudformation")
    kwargs = run_job_flow_from(template["Resources"][cluster_logical_id], names)
    cluster_id = emr.run_job_flow(**kwargs)["JobFlowId"]
    names[cluster_logical_id] = cluster_id
    outputs = {
        key: {"Value": resolve_cfn(template["Outputs"][key]["Value"], names)}
        for key in ("JobStepSpec", "JobClusterId")
    }
    stack_name = contract.stack_name(DOMAIN, REGION)
    cfn.create_stack(
        StackName=stack_name,
        TemplateBody=json.dumps(
            {
                "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
                "Outputs": outputs,
            }
        ),
    )
    spec = StepSpec.from_dict(json.loads(outputs["JobStepSpec"]["Value"]))
    try:
        yield Deployed(cluster_id, spec, kwargs["BootstrapActions"])
    finally:
        cfn.delete_stack(StackName=stack_name)
        emr.terminate_job_flows(JobFlowIds=[cluster_id])


def submitted_steps(endpoints: Endpoints, cluster_id: str) -> list[dict[str, Any]]:
    emr = client(endpoints, "emr")
    summaries = emr.list_steps(ClusterId=cluster_id)["Steps"]
    return [emr.describe_step(ClusterId=cluster_id, StepId=s["Id"])["Step"] for s in summaries]


def as_submitted(step: dict[str, Any]) -> dict[str, Any]:
    """describe_step's view of a build_step dict."""
    return {
        "Name": step["Name"],
        "ActionOnFailure": step["ActionOnFailure"],
        "Config": {
            "Jar": step["HadoopJarStep"]["Jar"],
            "Args": step["HadoopJarStep"]["Args"],
            "Properties": {},
        },
    }


def test_cluster_was_created_with_the_synthesized_bootstrap_actions(
    deployed: Deployed, endpoints: Endpoints
) -> None:
    actions = client(endpoints, "emr").list_bootstrap_actions(ClusterId=deployed.cluster_id)
    assert [
        {"Name": a["Name"], "ScriptBootstrapAction": {"Path": a["ScriptPath"], "Args": a["Args"]}}
        for a in actions["BootstrapActions"]
    ] == deployed.synthesized_actions


def test_redeploy_submits_exactly_the_built_step(
    deployed: Deployed, endpoints: Endpoints, capsys: pytest.CaptureFixture[str]
) -> None:
    code = redeploy.main(
        ["--instance", INSTANCE_ID, "--endpoint-url", endpoints.aws_url, "--wait-sec", "0"]
    )
    assert code == 0, capsys.readouterr().err
    steps = submitted_steps(endpoints, deployed.cluster_id)
    assert len(steps) == 1
    got = {k: steps[0][k] for k in ("Name", "ActionOnFailure", "Config")}
    assert got == as_submitted(build_step(deployed.spec))
    assert f"submitted step {steps[0]['Id']}" in capsys.readouterr().out


def test_wait_is_bounded_and_reports_the_step_still_running(
    deployed: Deployed, endpoints: Endpoints, capsys: pytest.CaptureFixture[str]
) -> None:
    code = redeploy.main(
        [
            "--instance", INSTANCE_ID, "--endpoint-url", endpoints.aws_url,
            "--wait-sec", "0.5", "--poll-sec", "0.1",
        ]
    )  # fmt: skip
    assert code == redeploy.EXIT_TIMEOUT
    assert "still RUNNING after" in capsys.readouterr().err
    assert len(submitted_steps(endpoints, deployed.cluster_id)) == 1


def test_flags_override_the_stack_outputs(
    deployed: Deployed, endpoints: Endpoints, tmp_path: Path
) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(deployed.spec.to_dict()), encoding="utf-8")
    code = redeploy.main(
        [
            "--instance", INSTANCE_ID, "--endpoint-url", endpoints.aws_url, "--wait-sec", "0",
            "--stack", "NoSuchStack", "--cluster-id", deployed.cluster_id,
            "--spec-file", str(spec_file),
        ]
    )  # fmt: skip
    assert code == 0
    (step,) = submitted_steps(endpoints, deployed.cluster_id)
    assert step["Config"]["Args"] == build_step(deployed.spec)["HadoopJarStep"]["Args"]


def test_a_terminated_cluster_gets_no_step(
    deployed: Deployed, endpoints: Endpoints, capsys: pytest.CaptureFixture[str]
) -> None:
    client(endpoints, "emr").terminate_job_flows(JobFlowIds=[deployed.cluster_id])
    code = redeploy.main(
        ["--instance", INSTANCE_ID, "--endpoint-url", endpoints.aws_url, "--wait-sec", "0"]
    )
    assert code == redeploy.EXIT_CLUSTER
    err = capsys.readouterr().err
    assert f"cluster {deployed.cluster_id} is TERMINAT" in err
    assert "allowed: RUNNING, WAITING" in err
    assert submitted_steps(endpoints, deployed.cluster_id) == []


def test_missing_stack_is_a_clear_usage_error(endpoints: Endpoints) -> None:
    result = subprocess.run(
        [
            sys.executable, "-m", "scripts.redeploy", "--instance", "nosuch-eu-west-1",
            "--endpoint-url", endpoints.aws_url,
        ],
        capture_output=True, text=True, timeout=120, check=False, cwd=REPO,
    )  # fmt: skip
    assert result.returncode == redeploy.EXIT_USAGE
    assert "Streaming-nosuch-eu-west-1" in result.stderr


def test_bad_instance_name_is_rejected() -> None:
    with pytest.raises(OperatorError, match="expected <domain>-<region>"):
        redeploy.parse_instance("Orders_eu")
