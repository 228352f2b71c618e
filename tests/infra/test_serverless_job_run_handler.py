"""``Custom::ServerlessJobRun``'s handler against in-process moto (EMR
Serverless and S3). moto starts every run in SUCCESS and ignores ``mode`` and
``retryPolicy``, so a fake job (:class:`FakeJob`) plays the running job: it
puts the run in RUNNING, holds the lease, and on the stop marker releases the
lease and ends the run, as model/graceful_stop.py does (or ignores it, to test
the cancel). Time is the test's clock: no sleeps."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.emrserverless.models import emrserverless_backends

from infra import serverless_job_run_handler as handler_module
from infra.serverless_job_run_handler import (
    Checkpoint,
    Clock,
    Handover,
    JobRuns,
    handle,
    stop_runs,
    typed_request,
)
from tests.infra.list_only_s3 import ListOnlyS3

REGION = "eu-west-1"
BUCKET = "data-bucket"
LEASE = f"s3://{BUCKET}/checkpoints/orders-eu-west-1/_lease"
MARKER = f"s3://{BUCKET}/control/orders-eu-west-1/stop"
ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/job"


class FakeJob:
    """The job side: runs of the application in RUNNING hold the lease; a run
    that sees the stop marker (when ``obeys``) releases the lease and ends."""

    def __init__(self, s3: Any, application_id: str) -> None:
        self.s3, self.application_id = s3, application_id
        self.obeys = True
        self.now = 1_000_000.0
        self.sleeps = 0

    def runs(self) -> list[Any]:
        backend = emrserverless_backends[DEFAULT_ACCOUNT_ID][REGION]
        runs: list[Any] = backend.job_runs.get(self.application_id, [])
        return runs

    def start_running(self) -> None:
        """What the service does with a started run: RUNNING, and the job takes the lease."""
        for run in self.runs():
            if run.state == "SUCCESS" and not getattr(run, "ended", False):
                run.state = "RUNNING"
        if any(run.state == "RUNNING" for run in self.runs()):
            body = json.dumps({"owner": "driver:1", "expires_at": self.now + 30})
            self.s3.put_object(Bucket=BUCKET, Key=LEASE.split("/", 3)[3], Body=body.encode())

    def marker(self) -> bool:
        found = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=MARKER.split("/", 3)[3])
        return bool(found.get("KeyCount"))

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        if self.obeys and self.marker():
            for run in self.runs():
                if run.state == "RUNNING":
                    run.state, run.ended = "SUCCESS", True
            self.s3.delete_object(Bucket=BUCKET, Key=LEASE.split("/", 3)[3])

    def clock(self) -> Clock:
        return Clock(now=lambda: self.now, sleep=self.sleep, deadline=self.now + 900)

    def states(self) -> list[str]:
        return [run.state for run in self.runs()]


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        emr = boto3.client("emr-serverless", region_name=REGION)
        # moto accepts only emr-X.Y.0 labels (its CreateApplication regex):
        # the emr-spark-8.x labels are refused there, not on AWS.
        app = emr.create_application(name="a", releaseLabel="emr-7.1.0", type="SPARK")
        yield {"s3": s3, "emr-serverless": emr, "application_id": app["applicationId"]}


def _request(application_id: str, name: str = "streaming-orders-v1") -> dict[str, Any]:
    """A request as CloudFormation hands it to the function: every scalar a string."""
    return {
        "applicationId": application_id,
        "executionRoleArn": ROLE,
        "name": name,
        "mode": "STREAMING",
        "executionTimeoutMinutes": "0",
        "retryPolicy": {"maxFailedAttemptsPerHour": "4"},
        "jobDriver": {
            "sparkSubmit": {
                "entryPoint": "s3://artifacts/job/v1/main.py",
                "entryPointArguments": ["--config", "s3://artifacts/job/v1/job-config.json"],
                "sparkSubmitParameters": "--py-files s3://artifacts/job/v1/app.zip",
            }
        },
        "configurationOverrides": {
            "monitoringConfiguration": {
                "cloudWatchLoggingConfiguration": {"enabled": "true", "logGroupName": "/g"}
            }
        },
    }


def _event(kind: str, request: dict[str, Any], physical: str | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "RequestType": kind,
        "ResourceProperties": {
            "StartJobRun": request,
            "Handover": {
                "LeaseUri": LEASE,
                "StopMarkerUri": MARKER,
                "StopTimeoutSec": "420",
                "CancelTimeoutSec": "120",
            },
        },
    }
    if physical is not None:
        event["PhysicalResourceId"] = physical
    return event


def _created(aws: dict[str, Any]) -> tuple[str, FakeJob, str]:
    """The application, its fake job and the run a Create started."""
    app = str(aws["application_id"])
    job = FakeJob(aws["s3"], app)
    return app, job, handle(_event("Create", _request(app)), aws, job.clock())


def _updated(aws: dict[str, Any], job: FakeJob, old: str) -> str:
    """The run an Update to ``streaming-orders-v2`` started in place of ``old``."""
    request = _request(str(aws["application_id"]), "streaming-orders-v2")
    return handle(_event("Update", request, old), aws, job.clock())


def test_typed_request_restores_the_integers_and_booleans_cloudformation_stringified() -> None:
    typed = typed_request(_request("app"))
    assert typed["executionTimeoutMinutes"] == 0
    assert typed["retryPolicy"] == {"maxFailedAttemptsPerHour": 4}
    logging = typed["configurationOverrides"]["monitoringConfiguration"]
    assert logging["cloudWatchLoggingConfiguration"]["enabled"] is True
    assert typed_request(typed) == typed


def test_create_starts_one_run_with_the_request_and_clears_a_stale_stop_marker(
    aws: dict[str, Any],
) -> None:
    app = aws["application_id"]
    job = FakeJob(aws["s3"], app)
    aws["s3"].put_object(Bucket=BUCKET, Key=MARKER.split("/", 3)[3], Body=b"old")
    run_id = handle(_event("Create", _request(app)), aws, job.clock())
    run = aws["emr-serverless"].get_job_run(applicationId=app, jobRunId=run_id)["jobRun"]
    assert run["name"] == "streaming-orders-v1"
    assert run["jobDriver"]["sparkSubmit"]["entryPoint"] == "s3://artifacts/job/v1/main.py"
    assert not job.marker()
    assert len(job.runs()) == 1


def test_update_hands_over_gracefully_before_the_new_run_starts(aws: dict[str, Any]) -> None:
    _app, job, old = _created(aws)
    job.start_running()
    new = _updated(aws, job, old)
    assert new != old
    by_id = {run.id: run for run in job.runs()}
    # The old run ended by itself (the marker), was not cancelled, and the
    # new one was started only after: one active run at the end.
    assert by_id[old].state == "SUCCESS"
    assert by_id[new].name == "streaming-orders-v2"
    assert job.sleeps >= 1
    assert not job.marker(), "the new run must not see the old run's stop request"
    job.start_running()
    assert job.states().count("RUNNING") == 1


def test_update_cancels_a_run_that_ignores_the_marker_only_after_the_bounded_wait(
    aws: dict[str, Any],
) -> None:
    _app, job, old = _created(aws)
    job.start_running()
    job.obeys = False
    start = job.now
    new = _updated(aws, job, old)
    by_id = {run.id: run for run in job.runs()}
    assert by_id[old].state == "CANCELLED"
    assert job.now - start >= 420, "cancelled before the graceful wait was over"
    assert job.now - start < 420 + 2 * 5 + 1
    assert by_id[new].state == "SUCCESS"  # moto's state for a started run


def test_update_stops_a_run_the_supervisor_restarted_too(aws: dict[str, Any]) -> None:
    app = aws["application_id"]
    job = FakeJob(aws["s3"], app)
    emr = aws["emr-serverless"]
    old = handle(_event("Create", _request(app)), aws, job.clock())
    # The deployed run failed; the supervisor restarted the same request.
    emr.cancel_job_run(applicationId=app, jobRunId=old)
    restarted = emr.start_job_run(**typed_request(_request(app)))["jobRunId"]
    job.start_running()
    new = _updated(aws, job, old)
    states = {run.id: run.state for run in job.runs()}
    assert states[restarted] == "SUCCESS"
    assert set(states) == {old, restarted, new}


def test_delete_stops_its_own_runs_and_leaves_a_newer_request_running(
    aws: dict[str, Any],
) -> None:
    app, job, old = _created(aws)
    job.start_running()
    new = _updated(aws, job, old)
    job.start_running()
    # CloudFormation's cleanup deletes the previous physical ID with the
    # previous properties: the new run is left alone, no marker is written.
    assert handle(_event("Delete", _request(app), old), aws, job.clock()) == old
    assert {run.id: run.state for run in job.runs()}[new] == "RUNNING"
    assert not job.marker()
    # The stack's delete stops the current run gracefully.
    handle(_event("Delete", _request(app, "streaming-orders-v2"), new), aws, job.clock())
    assert {run.id: run.state for run in job.runs()}[new] == "SUCCESS"


def test_delete_of_a_resource_that_never_started_does_nothing(aws: dict[str, Any]) -> None:
    app = aws["application_id"]
    job = FakeJob(aws["s3"], app)
    assert handle(_event("Delete", _request(app), "not-started"), aws, job.clock()) == "not-started"
    assert job.runs() == []


def test_the_waits_end_before_the_functions_deadline(aws: dict[str, Any]) -> None:
    app, job, old = _created(aws)
    job.start_running()
    job.obeys = False
    clock = Clock(now=lambda: job.now, sleep=job.sleep, deadline=job.now + 120)
    runs = JobRuns(aws["emr-serverless"], app)
    handover = Handover(LEASE, MARKER, stop_timeout_sec=420)
    start = job.now
    assert stop_runs(runs, Checkpoint(aws["s3"], handover), [old], clock, why="handover") == [old]
    assert job.now - start <= 120 - 30 + 5


class _Recorder(BaseHTTPRequestHandler):
    """CloudFormation's pre-signed response URL: records each PUT body."""

    bodies: ClassVar[list[dict[str, Any]]] = []

    def do_PUT(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def response_url() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    _Recorder.bodies = []
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/response", _Recorder.bodies
    server.shutdown()
    thread.join(timeout=10)


class _Context:
    def get_remaining_time_in_millis(self) -> int:
        return 900_000


def test_the_lambda_replies_success_with_the_run_and_failed_with_the_reason(
    aws: dict[str, Any],
    response_url: tuple[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, bodies = response_url
    monkeypatch.setattr(handler_module, "_clients", lambda: aws)
    base = {
        "StackId": "stack",
        "RequestId": "r1",
        "LogicalResourceId": "JobRun",
        "ResponseURL": url,
    }
    handler_module.handler(
        {**base, **_event("Create", _request(aws["application_id"]))}, _Context()
    )
    [ok] = bodies
    assert ok["Status"] == "SUCCESS"
    run = aws["emr-serverless"].get_job_run(
        applicationId=aws["application_id"], jobRunId=ok["PhysicalResourceId"]
    )
    assert ok["Data"] == {"JobRunId": run["jobRun"]["jobRunId"]}
    # A request the API refuses (an unknown application) still gets its answer.
    handler_module.handler({**base, **_event("Create", _request("nosuchapp"))}, _Context())
    failed = bodies[-1]
    assert failed["Status"] == "FAILED"
    assert failed["PhysicalResourceId"] == "not-started"
    assert "ResourceNotFoundException" in failed["Reason"]


def test_the_lease_is_looked_up_by_listing_not_by_a_denied_get(aws: dict[str, Any]) -> None:
    """The function's role lists the lease key (``s3:prefix``-conditioned
    ListBucket); a GetObject of a missing key may answer 403 without the
    implicit ListBucket check, so a free lease must not depend on it."""
    app = aws["application_id"]
    job = FakeJob(aws["s3"], app)
    s3 = ListOnlyS3(aws["s3"])
    checkpoint = Checkpoint(s3, Handover(LEASE, MARKER, stop_timeout_sec=420))
    assert not checkpoint.lease_held(job.now)  # no lease yet: free, no AccessDenied
    handle(_event("Create", _request(app)), aws, job.clock())
    job.start_running()
    assert checkpoint.lease_held(job.now)
    assert s3.listed == [LEASE.split("/", 3)[3]] * 2
