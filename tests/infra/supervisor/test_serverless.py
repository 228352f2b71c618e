"""The supervisor (infra/supervisor/handler.py) with its serverless target
(infra/supervisor/serverless.py) against in-process moto (EMR Serverless, S3,
SNS, CloudWatch): the same check and ``decide``, observed from the lease, the
exit record, the operator's stop marker and the application's runs; a
restart is StartJobRun of the stack's request. moto starts every run in
SUCCESS and ignores ``mode`` and ``retryPolicy``: a run the service is still
running or retrying is put in RUNNING by hand."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.emrserverless.models import emrserverless_backends

from artifacts.packaging import stage_supervisor
from infra.serverless.app import stage_handler
from infra.serverless.job_run_handler import HANDLER
from infra.supervisor import handler, serverless
from infra.supervisor.decision import Policy
from model import contract
from model.exit_record import ExitRecord, write_exit_record
from tests.infra.list_only_s3 import ListOnlyS3
from tests.infra.supervisor.test_handler import alarm_inbox, supervised_keys

REPO = Path(__file__).resolve().parents[3]
REGION = "us-east-1"
INSTANCE = "light-us-east-1"
BUCKET = "data-bucket"
CHECKPOINT = f"s3://{BUCKET}/checkpoints/{INSTANCE}/"
STATE = f"s3://{BUCKET}/control/{INSTANCE}/{contract.SUPERVISOR_STATE_NAME}"
MARKER = f"s3://{BUCKET}/control/{INSTANCE}/stop"
# The split of a budget of 5 (infra/serverless/job_run.py): 4 service attempts, 1 restart.
POLICY = Policy(max_restarts=1, backoff_sec=1, backoff_max_sec=1, start_grace_sec=60)


def _request(application_id: str) -> dict[str, Any]:
    return {
        "applicationId": application_id,
        "executionRoleArn": f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/job",
        "name": f"streaming-{INSTANCE}-0123abcd",
        "mode": "STREAMING",
        "executionTimeoutMinutes": 0,
        "retryPolicy": {"maxFailedAttemptsPerHour": 4},
        "jobDriver": {"sparkSubmit": {"entryPoint": "s3://artifacts/job/v1/main.py"}},
    }


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        names = ("s3", "emr-serverless", "sns", "cloudwatch", "sqs")
        clients = {n: boto3.client(n, region_name=REGION) for n in names}
        clients["s3"].create_bucket(Bucket=BUCKET)
        # moto accepts only emr-X.Y.0 labels; the stack's is emr-spark-8.1.0.
        app = clients["emr-serverless"].create_application(
            name="a", releaseLabel="emr-7.1.0", type="SPARK"
        )["applicationId"]
        topic, queue = alarm_inbox(clients)
        env = {
            handler.ENV_INSTANCE: INSTANCE,
            serverless.ENV_APPLICATION_ID: app,
            handler.ENV_CHECKPOINT: CHECKPOINT,
            handler.ENV_STATE: STATE,
            serverless.ENV_REQUEST: json.dumps(_request(app)),
            handler.ENV_POLICY: json.dumps(POLICY.__dict__),
            handler.ENV_TOPIC: topic,
            handler.ENV_STOP_MARKER: MARKER,
        }
        yield {**clients, "env": env, "app": app, "queue": queue}


def settings(aws: dict[str, Any]) -> handler.Settings:
    return handler.Settings.from_env(aws["env"], serverless.ServerlessRun)


def runs(aws: dict[str, Any]) -> list[Any]:
    found: list[Any] = emrserverless_backends[DEFAULT_ACCOUNT_ID][REGION].job_runs.get(
        aws["app"], []
    )
    return found


def put_lease(aws: dict[str, Any], expires_at: float) -> None:
    body = json.dumps({"owner": "driver:1", "instance": INSTANCE, "expires_at": expires_at})
    aws["s3"].put_object(Bucket=BUCKET, Key=f"checkpoints/{INSTANCE}/_lease", Body=body)


def alarms(aws: dict[str, Any]) -> list[dict[str, Any]]:
    found = aws["sqs"].receive_message(QueueUrl=aws["queue"], MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in found.get("Messages", [])]


def deployed_run(aws: dict[str, Any], state: str) -> Any:
    """The stack's run, in ``state`` (what the service shows)."""
    aws["emr-serverless"].start_job_run(**_request(aws["app"]))
    run = runs(aws)[-1]
    run.state = state
    return run


def fail(aws: dict[str, Any], at: float) -> None:
    """The job failed and the service gave up: the run FAILED, the lease expired."""
    for run in runs(aws):
        run.state = "FAILED"
    put_lease(aws, at - 1)
    record = ExitRecord(1, contract.EXIT_BATCH_FAILED, "batch 9 failed", at, "driver:1")
    write_exit_record(CHECKPOINT, record, aws["s3"])


def test_a_run_the_service_runs_or_retries_is_up_and_left_alone(aws: dict[str, Any]) -> None:
    now = time.time()
    deployed_run(aws, "RUNNING")
    put_lease(aws, now - 100)  # the service is retrying: no lease holder right now
    decision = handler.check(aws, settings(aws), now)
    assert decision.action == "none" and decision.reason == "starting"
    assert len(runs(aws)) == 1
    put_lease(aws, now + 90)
    assert handler.check(aws, settings(aws), now + 60).reason == "running"


def test_a_failed_run_restarts_within_the_budget_then_one_alarm(aws: dict[str, Any]) -> None:
    now = time.time()
    deployed_run(aws, "RUNNING")
    put_lease(aws, now + 30)
    handler.check(aws, settings(aws), now)
    fail(aws, now + 5)
    decision = handler.check(aws, settings(aws), now + 10)
    assert decision.action == "restart" and decision.reason == contract.EXIT_BATCH_FAILED
    assert len(runs(aws)) == 2
    restarted = aws["emr-serverless"].get_job_run(
        applicationId=aws["app"], jobRunId=runs(aws)[-1].id
    )
    assert restarted["jobRun"]["name"] == _request(aws["app"])["name"]
    assert restarted["jobRun"]["jobDriver"] == _request(aws["app"])["jobDriver"]
    # It runs, then fails again within the hour: the supervisor's share is spent.
    runs(aws)[-1].state = "RUNNING"
    put_lease(aws, now + 100)
    handler.check(aws, settings(aws), now + 90)
    fail(aws, now + 200)
    gave_up = handler.check(aws, settings(aws), now + 210)
    assert gave_up.action == "alarm"
    assert "restart budget spent" in gave_up.message
    assert len(runs(aws)) == 2
    [alarm] = alarms(aws)
    assert contract.EXIT_BATCH_FAILED in alarm["Subject"]
    # One alarm: the next check does nothing more.
    assert handler.check(aws, settings(aws), now + 270).action == "none"
    assert alarms(aws) == [] and len(runs(aws)) == 2


def test_exit_2_alarms_at_once_and_is_never_restarted(aws: dict[str, Any]) -> None:
    now = time.time()
    # The job refused its checkpoint and ended the run so the service does
    # not retry it (SUCCESS; job/outcome.py process_status), after writing its exit record.
    deployed_run(aws, "SUCCESS")
    refused = ExitRecord(2, contract.EXIT_CHECKPOINT_REFUSED, "old operator", now - 5, "d:1")
    write_exit_record(CHECKPOINT, refused, aws["s3"])
    decision = handler.check(aws, settings(aws), now)
    assert decision.action == "alarm"
    assert "a restart cannot cure it" in decision.message
    assert len(runs(aws)) == 1
    [alarm] = alarms(aws)
    assert alarm["Subject"] == f"{INSTANCE} supervisor: {contract.EXIT_CHECKPOINT_REFUSED}"


def test_make_stop_job_is_left_alone(aws: dict[str, Any]) -> None:
    now = time.time()
    deployed_run(aws, "SUCCESS")  # the job stopped on the operator's marker
    stopped = ExitRecord(
        0,
        contract.EXIT_STOPPED_ON_REQUEST,
        "stop requested by make stop-job",
        now - 5,
        "d:1",
        stopped_by=contract.STOP_BY_OPERATOR,
    )
    write_exit_record(CHECKPOINT, stopped, aws["s3"])
    for later in (0, 600, 3600):
        decision = handler.check(aws, settings(aws), now + later)
        assert decision.action == "none"
    assert len(runs(aws)) == 1 and alarms(aws) == []


def test_a_job_an_operator_stopped_is_left_alone_without_its_exit_record(
    aws: dict[str, Any],
) -> None:
    """The run ended while the job stopped on the operator's marker, before it
    wrote its exit record (killed mid-stop): the marker alone keeps it
    stopped, no StartJobRun, no alarm."""
    now = time.time()
    deployed_run(aws, "RUNNING")
    put_lease(aws, now + 30)
    handler.check(aws, settings(aws), now)
    for run in runs(aws):
        run.state = "CANCELLED"
    put_lease(aws, now - 1)
    aws["s3"].put_object(Bucket=BUCKET, Key=f"control/{INSTANCE}/stop", Body=b"stop\n")
    for later in (now + 60, now + 3_600):
        decision = handler.check(aws, settings(aws), later)
        assert decision.action == "none" and decision.reason == contract.EXIT_STOPPED_ON_REQUEST
    # (Without the marker this is a restart: no record, lease expired, no run
    # active; test_a_failed_run_restarts_within_the_budget_then_one_alarm.)
    assert len(runs(aws)) == 1 and alarms(aws) == []


def test_whether_a_key_exists_is_asked_by_listing_its_exact_prefix(aws: dict[str, Any]) -> None:
    """As on EMR: GetObject of a missing key denied, the
    check still works, by ListObjectsV2 of the lease, the exit record, the
    stop marker and the state."""
    s3 = ListOnlyS3(aws["s3"])
    decision = handler.check({**aws, "s3": s3}, settings(aws), time.time())
    assert decision.action == "none" and decision.reason == "starting"
    assert sorted(set(s3.listed)) == supervised_keys(INSTANCE)


def test_a_terminated_application_alarms(aws: dict[str, Any]) -> None:
    aws["emr-serverless"].stop_application(applicationId=aws["app"])  # moto: created STARTED
    aws["emr-serverless"].delete_application(applicationId=aws["app"])
    decision = handler.check(aws, settings(aws), time.time())
    assert decision.action == "alarm"
    assert "TERMINATED" in decision.message


def test_settings_refuse_a_request_that_is_not_a_streaming_run(aws: dict[str, Any]) -> None:
    env = dict(aws["env"])
    env[serverless.ENV_REQUEST] = json.dumps({**_request(aws["app"]), "mode": "BATCH"})
    with pytest.raises(ValueError, match="START_JOB_RUN is not a STREAMING"):
        handler.Settings.from_env(env, serverless.ServerlessRun)
    del env[serverless.ENV_APPLICATION_ID]
    with pytest.raises(ValueError, match="APPLICATION_ID is not set"):
        handler.Settings.from_env(env, serverless.ServerlessRun)


def test_the_staged_lambdas_import_from_their_stage_alone(tmp_path: Path) -> None:
    """The serverless supervisor and the job-run resource's handler load with
    only their staged files (and boto3, which the Lambda runtime brings)."""

    for staged, handler_name in (
        (stage_supervisor(REPO, tmp_path), serverless.HANDLER),
        (stage_handler(REPO, tmp_path), HANDLER),
    ):
        module, _, name = handler_name.rpartition(".")
        probe = (
            f"import sys, importlib; sys.path[:0] = [{str(staged)!r}]\n"
            f"assert callable(getattr(importlib.import_module({module!r}), {name!r}))\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('model', 'infra')))"
        )
        result = subprocess.run(
            [sys.executable, "-I", "-c", probe],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr
        assert "model.config" not in result.stdout, "pydantic is not in the Lambda runtime"
