"""scripts.start: refused while a job runs, only an operator's marker cleared,
the start confirmed by the lease or explained by the exit record; each
target's launcher against in-process moto (EMR, EMR Serverless patched as
the service behaves).

The "job" of the local cases is the small lease-holding process of
tests/scripts/test_stop.py, started by a launcher the test hands in: the
command only sees the lease, the marker and the exit record.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID

from infra.emr_step import CLUSTER_ID_OUTPUT, STEP_SPEC_OUTPUT, StepSpec, build_step
from infra.supervisor.serverless import ENV_APPLICATION_ID, ENV_REQUEST, ServerlessRun
from local import serverless_moto as sm
from model import contract
from model.config import JobConfig
from model.exit_record import ExitRecord, write_exit_record
from scripts import start
from scripts.command import OperatorError
from scripts.status.target import Target
from tests.scripts.local_runs import write_local_run
from tests.scripts.test_stop import FAKE_JOB

REGION = "eu-west-1"
ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/job"
SPEC = StepSpec("streaming-orders", "app", "s3://artifacts/job/v1", "s3://data/stop", ("a-1.jar",))


@dataclass
class FakeLauncher:
    """Starts the fake job (``mode`` as in test_stop's FAKE_JOB), or a job that
    writes an exit record and ends; records each start."""

    config: JobConfig
    mode: str = "graceful"
    blocked: str | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def busy(self) -> str | None:
        return self.blocked

    def start(self) -> str:
        checkpoint = Path(self.config.checkpoint_location)
        checkpoint.mkdir(parents=True, exist_ok=True)
        if self.mode == "refused":
            record = ExitRecord(2, contract.EXIT_CONFIG_REFUSED, "bad field", time.time(), "h:1")
            write_exit_record(str(checkpoint), record)
            return "job started (refused at once)"
        assert self.config.stop_marker_path is not None
        self.processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    FAKE_JOB,
                    str(checkpoint),
                    self.config.stop_marker_path,
                    self.mode,
                ]
            )
        )
        return f"job started (pid {self.processes[-1].pid})"


@pytest.fixture
def local_run(tmp_path: Path) -> Iterator[tuple[Target, FakeLauncher]]:
    config = write_local_run(tmp_path)
    target = Target(config, "job.json", "Streaming-orders-ap-northeast-2", local=True)
    launcher = FakeLauncher(config)
    yield target, launcher
    for process in launcher.processes:
        process.kill()
        process.wait(timeout=10)


def run_start(target: Target, launcher: Any, wait_sec: float = 30) -> tuple[int, str]:
    said: list[str] = []
    try:
        code = start.start(target, launcher, wait_sec=wait_sec, poll_sec=0.05, log=said.append)
    except OperatorError as exc:
        return exc.code, str(exc)
    return code, "\n".join(said)


def marker(config: JobConfig) -> Path:
    assert config.stop_marker_path is not None
    return Path(config.stop_marker_path)


def test_start_clears_an_operators_marker_and_waits_for_the_lease(
    local_run: tuple[Target, FakeLauncher],
) -> None:
    target, launcher = local_run
    marker(target.config).write_text("stop\n", encoding="utf-8")
    code, out = run_start(target, launcher)
    assert code == start.EXIT_STARTED, out
    assert "cleared the operator's stop marker" in out
    assert f"job running (lease {target.config.checkpoint_location}/_lease held by" in out
    assert not marker(target.config).exists()
    assert len(launcher.processes) == 1


def job_running(target: Target, launcher: FakeLauncher) -> None:
    assert run_start(target, launcher)[0] == start.EXIT_STARTED


def handovers_marker(target: Target, launcher: FakeLauncher) -> None:
    marker(target.config).write_text("handover requested by step s-1\n", encoding="utf-8")


def start_under_way_on_the_platform(target: Target, launcher: FakeLauncher) -> None:
    launcher.blocked = "application a-1 has an active job run"


@pytest.mark.parametrize(
    ("before", "said"),
    [
        (job_running, "refused, a start would make a second job"),
        (handovers_marker, "written by a deploy's handover"),
        (start_under_way_on_the_platform, "a-1 has an active job run; refused"),
    ],
)
def test_a_refused_start_starts_nothing_and_leaves_the_marker(
    local_run: tuple[Target, FakeLauncher],
    before: Callable[[Target, FakeLauncher], None],
    said: str,
) -> None:
    target, launcher = local_run
    before(target, launcher)
    processes, marker_left = list(launcher.processes), marker(target.config).exists()
    code, out = run_start(target, launcher)
    assert code == start.EXIT_REFUSED and said in out
    assert launcher.processes == processes
    assert marker(target.config).exists() == marker_left


def test_a_job_that_ends_at_start_is_told_by_its_exit_record(
    local_run: tuple[Target, FakeLauncher],
) -> None:
    target, launcher = local_run
    launcher.mode = "refused"
    code, out = run_start(target, launcher)
    assert code == start.EXIT_EXITED, out
    assert "the job exited at start" in out and "exit 2 config_refused: bad field" in out


def test_a_job_that_never_takes_its_lease_times_out(
    local_run: tuple[Target, FakeLauncher],
) -> None:
    target, _ = local_run

    @dataclass
    class Silent:
        def busy(self) -> str | None:
            return None

        def start(self) -> str:
            return "submitted"

    code, out = run_start(target, Silent(), wait_sec=0.3)
    assert code == start.EXIT_TIMEOUT and "does not hold its lease after 0s" in out


# ------------------------------------------------------------------ EMR


@pytest.fixture
def emr() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("emr", region_name=REGION)


def cluster(emr: Any) -> str:
    return str(
        emr.run_job_flow(
            Name="c",
            ReleaseLabel="emr-7.1.0",
            Instances={
                "MasterInstanceType": "m5.xlarge",
                "InstanceCount": 1,
                "KeepJobFlowAliveWhenNoSteps": True,
            },
            JobFlowRole="EMR_EC2_DefaultRole",
            ServiceRole="EMR_DefaultRole",
        )["JobFlowId"]
    )


def test_emr_submits_the_stacks_step_and_then_counts_as_a_start_under_way(emr: Any) -> None:
    cluster_id = cluster(emr)
    outputs = {CLUSTER_ID_OUTPUT: cluster_id, STEP_SPEC_OUTPUT: json.dumps(SPEC.to_dict())}
    launcher = start.EmrLauncher(emr, outputs)
    assert launcher.busy() is None
    said = launcher.start()
    (step,) = emr.list_steps(ClusterId=cluster_id)["Steps"]
    assert f"submitted step {step['Id']}" in said
    assert step["Name"] == build_step(SPEC)["Name"]
    assert step["Config"]["Args"] == build_step(SPEC)["HadoopJarStep"]["Args"]
    assert f"has steps under way: {step['Id']}" in str(launcher.busy())


def test_emr_refuses_a_cluster_that_cannot_run_the_job(emr: Any) -> None:
    cluster_id = cluster(emr)
    emr.terminate_job_flows(JobFlowIds=[cluster_id])
    outputs = {CLUSTER_ID_OUTPUT: cluster_id, STEP_SPEC_OUTPUT: json.dumps(SPEC.to_dict())}
    assert "is TERMINATED; allowed: RUNNING, WAITING" in str(start.EmrLauncher(emr, outputs).busy())


# ------------------------------------------------------------ EMR Serverless


@pytest.fixture
def serverless() -> Iterator[Any]:
    with mock_aws(), sm.patched():
        yield boto3.client("emr-serverless", region_name=REGION)


def request(application_id: str) -> dict[str, Any]:
    return {
        "applicationId": application_id,
        "executionRoleArn": ROLE,
        "name": "streaming-orders-abc",
        "mode": "STREAMING",
        "jobDriver": {"sparkSubmit": {"entryPoint": "s3://b/main.py"}},
    }


def test_serverless_starts_the_stacks_request_once(serverless: Any) -> None:
    app = serverless.create_application(name="a", releaseLabel="emr-spark-8.1.0", type="SPARK")[
        "applicationId"
    ]
    launcher = start.ServerlessLauncher(serverless, ServerlessRun(app, request(app)))
    assert launcher.busy() is None
    said = launcher.start()
    (run,) = serverless.list_job_runs(applicationId=app)["jobRuns"]
    assert said == f"started job run {run['id']} on {app}"
    assert run["name"] == "streaming-orders-abc" and run["state"] == "RUNNING"
    assert "has an active job run" in str(launcher.busy())


@dataclass
class FakeStack:
    """CloudFormation's ListStackResources and Lambda's GetFunctionConfiguration
    for a stack of two functions, the second the supervisor."""

    env: dict[str, str]

    def get_paginator(self, name: str) -> Any:
        assert name == "list_stack_resources"
        summaries = [
            {"ResourceType": "AWS::S3::Bucket", "PhysicalResourceId": "b"},
            {"ResourceType": start.FUNCTION_TYPE, "PhysicalResourceId": "job-run-fn"},
            {"ResourceType": start.FUNCTION_TYPE, "PhysicalResourceId": "supervisor-fn"},
        ]

        class Pages:
            def paginate(self, StackName: str) -> list[dict[str, Any]]:  # noqa: N803
                return [{"StackResourceSummaries": summaries}]

        return Pages()

    def get_function_configuration(self, FunctionName: str) -> dict[str, Any]:  # noqa: N803
        env = self.env if FunctionName == "supervisor-fn" else {"X": "1"}
        return {"Environment": {"Variables": env}}


def test_the_serverless_request_is_the_supervisors() -> None:
    wanted = request("a-1")
    stack = FakeStack({ENV_APPLICATION_ID: "a-1", ENV_REQUEST: json.dumps(wanted)})
    run = start.supervisor_request(stack, stack, "Streaming-orders-eu-west-1")
    assert run == ServerlessRun("a-1", wanted)


def test_a_stack_without_a_supervisor_is_named() -> None:
    stack = FakeStack({"X": "1"})
    with pytest.raises(OperatorError, match="no supervisor function with APPLICATION_ID"):
        start.supervisor_request(stack, stack, "Streaming-orders-eu-west-1")


def test_the_launcher_follows_the_stacks_outputs(emr: Any, tmp_path: Path) -> None:
    """EMR by JobClusterId; a stack with neither output is named."""
    config = write_local_run(tmp_path)
    cfn = boto3.client("cloudformation", region_name=config.region)
    cfn.create_stack(
        StackName="Streaming-orders-eu-west-1",
        TemplateBody=json.dumps(
            {
                "Resources": {"T": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {CLUSTER_ID_OUTPUT: {"Value": "j-1"}},
            }
        ),
    )
    target = Target(config, "s3://x", "Streaming-orders-eu-west-1", local=False)
    assert isinstance(start.launcher_for(target, _args(tmp_path)), start.EmrLauncher)
    other = Target(config, "s3://x", "Streaming-none-eu-west-1", local=False)
    cfn.create_stack(
        StackName="Streaming-none-eu-west-1",
        TemplateBody=json.dumps({"Resources": {"T": {"Type": "AWS::SNS::Topic"}}}),
    )
    with pytest.raises(OperatorError, match="neither JobClusterId nor ServerlessApplicationId"):
        start.launcher_for(other, _args(tmp_path))


def _args(work_dir: Path) -> Any:
    return argparse.Namespace(work_dir=work_dir, cdk_json_for_run=None)


def test_the_local_launcher_names_a_missing_run(tmp_path: Path) -> None:
    write_local_run(tmp_path)
    launcher = start.LocalLauncher(tmp_path, "orders-eu-west-1")
    with pytest.raises(OperatorError, match="no local run under"):
        launcher.start()
