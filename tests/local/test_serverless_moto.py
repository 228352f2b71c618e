"""The patched EMR Serverless emulator (local/serverless_moto.py): the release
label, mode, retry policy and timeout are kept, a run is RUNNING until its
attempt ends, and a failed STREAMING attempt is retried within the policy.
With job.outcome.process_status: a refused configuration (exit 2) is not retried."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID

from job.outcome import ExitCode, process_status
from local import serverless_moto as sm
from local.emulators import start_moto

REGION = "eu-west-1"
ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/job"
DRIVER = {"sparkSubmit": {"entryPoint": "s3://b/main.py", "entryPointArguments": ["--x"]}}


@pytest.fixture
def emr() -> Iterator[Any]:
    with mock_aws(), sm.patched():
        yield boto3.client("emr-serverless", region_name=REGION)


def _app(emr: Any) -> str:
    app = emr.create_application(name="a", releaseLabel="emr-spark-8.1.0", type="SPARK")
    return str(app["applicationId"])


def _start(emr: Any, app: str, **kw: Any) -> tuple[str, Any]:
    run_id = emr.start_job_run(applicationId=app, executionRoleArn=ROLE, jobDriver=DRIVER, **kw)[
        "jobRunId"
    ]
    return run_id, sm.job_run(app, run_id, DEFAULT_ACCOUNT_ID, REGION)


def test_stock_moto_refuses_the_release_and_forgets_the_mode() -> None:
    """The controls: without the patch the deviations are there."""
    with mock_aws():
        emr = boto3.client("emr-serverless", region_name=REGION)
        with pytest.raises(emr.exceptions.ValidationException):
            _app(emr)
        app = emr.create_application(name="a", releaseLabel="emr-7.1.0", type="SPARK")
        run_id = emr.start_job_run(
            applicationId=app["applicationId"],
            executionRoleArn=ROLE,
            jobDriver=DRIVER,
            mode="STREAMING",
            executionTimeoutMinutes=0,
        )["jobRunId"]
        run = emr.get_job_run(applicationId=app["applicationId"], jobRunId=run_id)["jobRun"]
        assert "mode" not in run and run["state"] == "SUCCESS"
        assert run["executionTimeoutMinutes"] == 720


def test_a_streaming_run_keeps_its_request_and_runs(emr: Any) -> None:
    app = _app(emr)
    assert emr.get_application(applicationId=app)["application"]["releaseLabel"] == (
        "emr-spark-8.1.0"
    )
    run_id, _ = _start(
        emr,
        app,
        mode="STREAMING",
        retryPolicy={"maxFailedAttemptsPerHour": 3},
        executionTimeoutMinutes=0,
    )
    run = emr.get_job_run(applicationId=app, jobRunId=run_id)["jobRun"]
    assert (run["mode"], run["state"], run["attempt"]) == ("STREAMING", "RUNNING", 1)
    assert run["retryPolicy"] == {"maxFailedAttemptsPerHour": 3}
    assert run["executionTimeoutMinutes"] == 0


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"mode": "STREAMING", "retryPolicy": {"maxFailedAttemptsPerHour": 11}}, "1-10"),
        ({"mode": "STREAMING", "retryPolicy": {"maxAttempts": 2}}, "BATCH mode only"),
        ({"mode": "BATCH", "retryPolicy": {"maxFailedAttemptsPerHour": 2}}, "STREAMING mode"),
    ],
)
def test_a_retry_policy_of_the_other_mode_is_refused(
    emr: Any, kw: dict[str, Any], message: str
) -> None:
    with pytest.raises(emr.exceptions.ValidationException, match=message):
        _start(emr, _app(emr), **kw)


def test_failed_streaming_attempts_are_retried_within_the_hour_then_the_run_fails(
    emr: Any,
) -> None:
    retried: list[int] = []
    sm.on_retry.append(lambda run: retried.append(run.attempt))
    run_id, run = _start(
        emr, _app(emr), mode="STREAMING", retryPolicy={"maxFailedAttemptsPerHour": 3}
    )
    assert sm.end_attempt(run, 1, now=1_000.0) == "RUNNING"
    assert sm.end_attempt(run, 1, now=1_010.0) == "RUNNING"
    # An hour later the first two failures no longer count.
    assert sm.end_attempt(run, 1, now=4_700.0) == "RUNNING"
    assert sm.end_attempt(run, 1, now=4_710.0) == "RUNNING"
    assert sm.end_attempt(run, 4, now=4_720.0) == "FAILED"
    assert retried == [2, 3, 4, 5]
    got = emr.get_job_run(applicationId=run.application_id, jobRunId=run_id)["jobRun"]
    assert (got["state"], got["attempt"]) == ("FAILED", 5)
    with pytest.raises(ValueError, match="in FAILED, expected RUNNING"):
        sm.end_attempt(run, 1)


def test_a_refused_configuration_ends_the_run_without_a_retry(emr: Any) -> None:
    """Contract 3: the job's exit 2 on --platform serverless is status 0."""
    retried: list[int] = []
    sm.on_retry.append(lambda run: retried.append(run.attempt))
    _, refused = _start(emr, _app(emr), mode="STREAMING")
    assert sm.end_attempt(refused, process_status(ExitCode.BAD_CONFIG, "serverless")) == "SUCCESS"
    _, failed = _start(emr, _app(emr), mode="STREAMING")
    assert sm.end_attempt(failed, process_status(ExitCode.QUERY_FAILED, "serverless")) == "RUNNING"
    # The same exit 2 on the EMR code path would have been retried here.
    _, on_emr = _start(emr, _app(emr), mode="STREAMING")
    assert sm.end_attempt(on_emr, process_status(ExitCode.BAD_CONFIG, "emr")) == "RUNNING"
    assert retried == [2, 2]


def test_a_batch_run_is_retried_up_to_max_attempts(emr: Any) -> None:
    _, run = _start(emr, _app(emr), mode="BATCH", retryPolicy={"maxAttempts": 2})
    assert sm.end_attempt(run, 1) == "RUNNING"
    assert sm.end_attempt(run, 1) == "FAILED"


@pytest.mark.emulators  # a moto server child process
def test_the_local_moto_server_serves_the_patched_api() -> None:
    """``python -m local.moto_server`` (every local run's moto) applies the patch."""

    server = start_moto()
    try:
        emr = boto3.client(
            "emr-serverless",
            region_name=REGION,
            endpoint_url=f"http://127.0.0.1:{server.port}",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        app = _app(emr)
        run_id = emr.start_job_run(
            applicationId=app,
            executionRoleArn=ROLE,
            jobDriver=DRIVER,
            mode="STREAMING",
            retryPolicy={"maxFailedAttemptsPerHour": 2},
            executionTimeoutMinutes=0,
        )["jobRunId"]
        run = emr.get_job_run(applicationId=app, jobRunId=run_id)["jobRun"]
        assert (run["mode"], run["state"], run["executionTimeoutMinutes"]) == (
            "STREAMING",
            "RUNNING",
            0,
        )
    finally:
        server.stop()


# The application's lifecycle rules the patch enforces (local/serverless_moto.py's
# docstring cites each page).


def _state(emr: Any, app: str) -> str:
    return str(emr.get_application(applicationId=app)["application"]["state"])


def test_an_application_is_created_created_and_a_run_auto_starts_it(emr: Any) -> None:
    """Application states (UG applications.html): CREATED, then STARTED by a
    submitted run when auto-start is on (UG app-behavior.html)."""
    app = _app(emr)
    assert _state(emr, app) == "CREATED"
    _start(emr, app, mode="STREAMING")
    assert _state(emr, app) == "STARTED"


def test_a_running_job_keeps_the_application_from_stopping_updating_and_deleting(
    emr: Any,
) -> None:
    """API StopApplication: "All scheduled and running jobs must be completed or
    cancelled before stopping an application"; API UpdateApplication and
    DeleteApplication: the application must be CREATED or STOPPED."""
    app = _app(emr)
    run_id, _ = _start(emr, app, mode="STREAMING")
    capacity = {"cpu": "2 vCPU", "memory": "5 GB"}
    with pytest.raises(emr.exceptions.ValidationException, match="must be completed"):
        emr.stop_application(applicationId=app)
    with pytest.raises(emr.exceptions.ValidationException, match="CREATED, STOPPED"):
        emr.update_application(applicationId=app, maximumCapacity=capacity)
    with pytest.raises(emr.exceptions.ValidationException, match="CREATED, STOPPED"):
        emr.delete_application(applicationId=app)
    emr.cancel_job_run(applicationId=app, jobRunId=run_id)
    emr.stop_application(applicationId=app)
    # STOPPING until the stop completes: a delete that does not wait is refused.
    with pytest.raises(emr.exceptions.ValidationException, match="CREATED, STOPPED"):
        emr.delete_application(applicationId=app)
    assert _state(emr, app) == "STOPPING"
    assert _state(emr, app) == "STOPPED"
    emr.update_application(applicationId=app, maximumCapacity=capacity)
    emr.delete_application(applicationId=app)
    assert _state(emr, app) == "TERMINATED"


def test_start_job_run_is_idempotent_on_its_client_token(emr: Any) -> None:
    """API StartJobRun ``clientToken``: the idempotency token; a repeat returns
    the run it started instead of a second one."""
    app = _app(emr)
    first, _ = _start(emr, app, mode="STREAMING", clientToken="t-1")
    again, _ = _start(emr, app, mode="STREAMING", clientToken="t-1")
    other, _ = _start(emr, app, mode="STREAMING", clientToken="t-2")
    assert first == again
    assert other != first
    runs = emr.list_job_runs(applicationId=app)["jobRuns"]
    assert sorted(run["id"] for run in runs) == sorted({first, other})


def test_stock_moto_lets_a_running_application_stop_and_repeats_a_client_token() -> None:
    """The controls: what stock moto lets through that AWS refuses."""
    with mock_aws():
        emr = boto3.client("emr-serverless", region_name=REGION)
        app = emr.create_application(name="a", releaseLabel="emr-7.1.0", type="SPARK")
        app_id = app["applicationId"]
        assert _state(emr, app_id) == "STARTED"
        first = emr.start_job_run(
            applicationId=app_id, executionRoleArn=ROLE, jobDriver=DRIVER, clientToken="t"
        )["jobRunId"]
        again = emr.start_job_run(
            applicationId=app_id, executionRoleArn=ROLE, jobDriver=DRIVER, clientToken="t"
        )["jobRunId"]
        assert first != again
