"""Job runs of the patched emulator run as processes (local/serverless_runs.py):
the job's own main() ends each attempt, and the run shows what the service
would: a refused configuration on --platform serverless ends SUCCESS after one
attempt; the same refusal on the EMR code path fails and is retried until the
policy gives up; CancelJobRun kills the attempt's process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID

from local import serverless_moto as sm
from local.job_process import REPO_ROOT
from local.serverless_runs import RunProcesses
from model.polling import wait_for

REGION = "eu-west-1"
ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/job"


def _launch(run: Any) -> subprocess.Popen[bytes]:
    """The attempt: the job's main() with the run's entry-point arguments
    (``sleep`` instead when the arguments say so)."""
    args = list(run.job_driver["sparkSubmit"]["entryPointArguments"])
    if args[:1] == ["--sleep"]:
        command = [sys.executable, "-c", "import time; time.sleep(120)"]
    else:
        command = [sys.executable, "-m", "job", *args]
    return subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@pytest.fixture
def emr() -> Iterator[tuple[Any, str, RunProcesses]]:
    with mock_aws(), sm.patched(), RunProcesses(_launch) as processes:
        client = boto3.client("emr-serverless", region_name=REGION)
        app = client.create_application(name="a", releaseLabel="emr-spark-8.1.0", type="SPARK")
        yield client, app["applicationId"], processes


def _start(client: Any, app: str, args: list[str], per_hour: int = 2) -> str:
    return str(
        client.start_job_run(
            applicationId=app,
            executionRoleArn=ROLE,
            mode="STREAMING",
            retryPolicy={"maxFailedAttemptsPerHour": per_hour},
            executionTimeoutMinutes=0,
            jobDriver={"sparkSubmit": {"entryPoint": "main.py", "entryPointArguments": args}},
        )["jobRunId"]
    )


def _settle(client: Any, app: str, processes: RunProcesses, run_id: str) -> dict[str, Any]:
    def run(job_run_id: str) -> Any:
        return sm.job_run(app, job_run_id, DEFAULT_ACCOUNT_ID, REGION)

    def ended() -> bool:
        processes.poll(run)
        return bool(run(run_id).state != "RUNNING")

    wait_for(ended, timeout=120, interval=0.1)
    got: dict[str, Any] = client.get_job_run(applicationId=app, jobRunId=run_id)["jobRun"]
    return got


def test_a_refused_configuration_on_serverless_ends_the_run_without_a_retry(
    emr: tuple[Any, str, RunProcesses], tmp_path: Path
) -> None:
    client, app, processes = emr
    missing = str(tmp_path / "missing.json")
    run_id = _start(client, app, ["--config", missing, "--platform", "serverless"])
    run = _settle(client, app, processes, run_id)
    assert (run["state"], run["attempt"]) == ("SUCCESS", 1)
    assert processes.ended == [(run_id, 1, 0, "SUCCESS")]


def test_the_same_refusal_on_the_emr_code_path_is_retried_until_the_policy_gives_up(
    emr: tuple[Any, str, RunProcesses], tmp_path: Path
) -> None:
    """The control: exit 2 as the process status fails the run, and the
    service would start it again."""
    client, app, processes = emr
    missing = str(tmp_path / "missing.json")
    run_id = _start(client, app, ["--config", missing, "--platform", "emr"], per_hour=2)
    run = _settle(client, app, processes, run_id)
    assert (run["state"], run["attempt"]) == ("FAILED", 2)
    assert processes.ended == [(run_id, 1, 2, "RUNNING"), (run_id, 2, 2, "FAILED")]


def test_cancel_kills_the_attempts_process(emr: tuple[Any, str, RunProcesses]) -> None:
    client, app, processes = emr
    run_id = _start(client, app, ["--sleep"])
    process = processes.processes[run_id]
    assert process.poll() is None
    client.cancel_job_run(applicationId=app, jobRunId=run_id)
    assert process.poll() is not None and run_id not in processes.processes
    got = client.get_job_run(applicationId=app, jobRunId=run_id)["jobRun"]
    assert got["state"] == "CANCELLED"
