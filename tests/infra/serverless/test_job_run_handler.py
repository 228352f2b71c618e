"""``Custom::ServerlessJobRun``'s handler, one request at a time, against
in-process moto with the patched EMR Serverless (runs start RUNNING) and a
fake job (tests/infra/serverless/fakes.py) that plays the running job: it
holds the lease, and on the stop marker releases it and ends its attempt, as
model/graceful_stop.py does (or ignores it, to test the cancel). Time is the
test's clock: no sleeps. CloudFormation's sequences of requests are in
tests/infra/serverless/test_job_run_lifecycle.py."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import boto3
import pytest
from moto import mock_aws

from infra.serverless import job_run_handler as handler_module
from infra.serverless.job_run_handler import (
    Checkpoint,
    Clock,
    Handover,
    JobRuns,
    client_token,
    handle,
    stop_runs,
    typed_request,
)
from local import serverless_moto as sm
from tests.infra.list_only_s3 import ListOnlyS3
from tests.infra.serverless.fakes import BUCKET, LEASE, MARKER, REGION, FakeJob, handover
from tests.infra.serverless.fakes import event as cfn_event
from tests.infra.serverless.fakes import request as _request


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws(), sm.patched():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        emr = boto3.client("emr-serverless", region_name=REGION)
        app = emr.create_application(name="a", releaseLabel="emr-spark-8.1.0", type="SPARK")
        yield {"s3": s3, "emr-serverless": emr, "application_id": app["applicationId"]}


def _event(
    kind: str, request: dict[str, Any], physical: str | None = None, **kw: Any
) -> dict[str, Any]:
    return cfn_event(kind, {"StartJobRun": request, "Handover": handover()}, physical, **kw)


def _created(aws: dict[str, Any]) -> tuple[str, FakeJob, str]:
    """The application, its fake job and the run a Create started."""
    app = str(aws["application_id"])
    job = FakeJob(aws["s3"], app)
    return app, job, handle(_event("Create", _request(app)), aws, job.clock()).data["JobRunId"]


def _updated(aws: dict[str, Any], job: FakeJob, physical: str) -> str:
    """The run an Update to ``streaming-orders-v2`` started in place of the running one."""
    app = str(aws["application_id"])
    old = {"StartJobRun": _request(app), "Handover": handover()}
    update = _event(
        "Update", _request(app, "streaming-orders-v2"), physical, old=old, request_id="r-2"
    )
    return handle(update, aws, job.clock()).data["JobRunId"]


def _physical(aws: dict[str, Any]) -> str:
    return handler_module.physical_id(_event("Create", _request(str(aws["application_id"]))))


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
    result = handle(_event("Create", _request(app)), aws, job.clock())
    run_id = result.data["JobRunId"]
    run = aws["emr-serverless"].get_job_run(applicationId=app, jobRunId=run_id)["jobRun"]
    assert run["name"] == "streaming-orders-v1"
    assert run["jobDriver"]["sparkSubmit"]["entryPoint"] == "s3://artifacts/job/v1/main.py"
    assert run["tags"] == {handler_module.OWNER_TAG: result.physical_id}
    assert result.physical_id != run_id, "the physical ID is the resource's, not the run's"
    assert not job.marker()
    assert len(job.runs()) == 1


def test_the_physical_id_is_one_for_the_resources_life(aws: dict[str, Any]) -> None:
    """crpg-ref-requesttypes-update.html: a different physical ID returned by an
    Update means a replacement, and a cleanup Delete of the old one later."""
    app = str(aws["application_id"])
    job = FakeJob(aws["s3"], app)
    created = handle(_event("Create", _request(app)), aws, job.clock()).physical_id
    retried = handle(_event("Create", _request(app)), aws, job.clock()).physical_id
    assert created == retried, "a retried Create must name the same resource"
    job.start_running()
    old = {"StartJobRun": _request(app), "Handover": handover()}
    update = _event("Update", _request(app, "streaming-orders-v2"), created, old=old)
    assert handle(update, aws, job.clock()).physical_id == created
    # A resource deployed when the physical ID was the run's ID keeps it.
    legacy = _event("Update", _request(app, "streaming-orders-v3"), "00legacyrunid", old=old)
    assert handle(legacy, aws, job.clock()).physical_id == "00legacyrunid"


def test_a_retried_request_starts_no_second_run_but_a_later_update_does(
    aws: dict[str, Any],
) -> None:
    """API StartJobRun's clientToken: the request and CloudFormation's RequestId."""
    app = str(aws["application_id"])
    job = FakeJob(aws["s3"], app)
    first = handle(_event("Create", _request(app)), aws, job.clock()).data["JobRunId"]
    again = handle(_event("Create", _request(app)), aws, job.clock()).data["JobRunId"]
    assert first == again
    assert [run.state for run in job.runs()] == ["RUNNING"]
    typed = typed_request(_request(app))
    assert client_token(typed, "r-1") != client_token(typed, "r-2")
    assert len(client_token(typed, "r-1")) <= 64


def test_update_hands_over_gracefully_before_the_new_run_starts(aws: dict[str, Any]) -> None:
    _app, job, old = _created(aws)
    job.start_running()
    new = _updated(aws, job, _physical(aws))
    assert new != old
    by_id = {run.id: run for run in job.runs()}
    # The old run ended by itself (the marker), was not cancelled, and the
    # new one was started only after: one active run at the end.
    assert by_id[old].state == "SUCCESS"
    assert by_id[new].name == "streaming-orders-v2"
    assert job.sleeps >= 1
    assert not job.marker(), "the new run must not see the old run's stop request"
    assert job.states().count("RUNNING") == 1


def test_update_cancels_a_run_that_ignores_the_marker_only_after_the_bounded_wait(
    aws: dict[str, Any],
) -> None:
    _app, job, old = _created(aws)
    job.start_running()
    job.obeys = False
    start = job.now
    new = _updated(aws, job, _physical(aws))
    by_id = {run.id: run for run in job.runs()}
    assert by_id[old].state == "CANCELLED"
    assert job.now - start >= 420, "cancelled before the graceful wait was over"
    assert job.now - start < 420 + 2 * 5 + 1
    assert by_id[new].state == "RUNNING"


def test_update_stops_a_run_the_supervisor_restarted_too(aws: dict[str, Any]) -> None:
    app, job, old = _created(aws)
    emr = aws["emr-serverless"]
    # The deployed run failed; the supervisor restarted the same request.
    emr.cancel_job_run(applicationId=app, jobRunId=old)
    restarted = emr.start_job_run(**typed_request(_request(app)))["jobRunId"]
    job.start_running()
    new = _updated(aws, job, _physical(aws))
    states = {run.id: run.state for run in job.runs()}
    assert states[restarted] == "SUCCESS"
    assert set(states) == {old, restarted, new}


def test_delete_stops_only_what_its_own_id_started_and_then_the_application(
    aws: dict[str, Any],
) -> None:
    app, job, _old = _created(aws)
    emr = aws["emr-serverless"]
    emr.cancel_job_run(applicationId=app, jobRunId=_old)
    # Another resource's run (a renamed logical ID, say) and this one's.
    other = handle(
        _event("Create", _request(app, "streaming-orders-other"), logical_id="Other"),
        aws,
        job.clock(),
    ).data["JobRunId"]
    mine = handle(_event("Create", _request(app), request_id="r-3"), aws, job.clock())
    job.start_running()
    # The marker is the checkpoint's, seen by every copy of the job: here no
    # copy takes it, so what the Delete picked is what it cancels.
    job.obeys = False
    handle(_event("Delete", _request(app), _physical(aws)), aws, job.clock())
    states = {run.id: run.state for run in job.runs()}
    assert states[other] == "RUNNING", "a Delete stopped a run its ID did not start"
    assert states[mine.data["JobRunId"]] == "CANCELLED"
    assert emr.get_application(applicationId=app)["application"]["state"] == "STARTED"
    job.obeys = True
    # The other resource's Delete: nothing left, so the application is stopped.
    handle(
        _event("Delete", _request(app, "streaming-orders-other"), other, logical_id="Other"),
        aws,
        job.clock(),
    )
    assert handler_module.Application(emr, app).described()["state"] == "STOPPED"


def test_delete_of_a_resource_that_never_started_does_nothing(aws: dict[str, Any]) -> None:
    app = aws["application_id"]
    job = FakeJob(aws["s3"], app)
    result = handle(_event("Delete", _request(app), "not-started"), aws, job.clock())
    assert result.physical_id == "not-started"
    assert job.runs() == []
    assert not job.marker()
    # The Delete after a Create that failed on an application that does not
    # exist must succeed too, or the stack's rollback fails.
    gone = handle(_event("Delete", _request("nosuchapp"), "JobRun-x"), aws, job.clock())
    assert gone.physical_id == "JobRun-x"


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
    [run] = aws["emr-serverless"].list_job_runs(applicationId=aws["application_id"])["jobRuns"]
    assert ok["Data"] == {"JobRunId": run["id"]}
    assert ok["PhysicalResourceId"].startswith("JobRun-")
    # A request the API refuses (an unknown application) still gets its
    # answer, with the ID the Delete that follows a failed Create will carry.
    handler_module.handler({**base, **_event("Create", _request("nosuchapp"))}, _Context())
    failed = bodies[-1]
    assert failed["Status"] == "FAILED"
    assert failed["PhysicalResourceId"] == ok["PhysicalResourceId"]
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
