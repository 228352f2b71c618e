"""``Custom::ServerlessJobRun`` and ``Custom::ServerlessApplicationGuard``: the
Lambda code that starts, hands over and stops the instance's EMR Serverless
streaming job run, and stops it around an update of its application
(docs/serverless.md, "The job run" and "Lifecycle").

``Custom::ServerlessJobRun``. Properties: ``StartJobRun`` (the request of
infra/serverless/job_run.py, as ``start_job_run`` takes it), ``Handover``
(``LeaseUri``, ``StopMarkerUri``, ``PendingRunUri``, ``StopTimeoutSec``,
``CancelTimeoutSec``) and ``ConfigHash`` (the hash of the application's
configuration, also the application's tag :data:`CONFIG_TAG`).

* The physical ID is stable for the resource's life (:func:`physical_id`):
  an Update never returns another one, so CloudFormation never treats it as a
  replacement and never sends a cleanup Delete for it
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requesttypes-update.html).
  The run's ID is in the reply's ``Data`` (``JobRunId``, GetAtt). A resource
  deployed when the physical ID was the run's ID keeps that ID.
* Create: delete a stale stop marker, then ``StartJobRun``, with a
  ``clientToken`` of the request and the CloudFormation ``RequestId``
  (:func:`client_token`): a Lambda retry of the same request returns the run
  it started, a later Update with the same request starts a new one
  (https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_StartJobRun.html).
  The run carries the tag :data:`OWNER_TAG` = the physical ID.
* Update: nothing when only ``Handover`` changed and the job runs (same
  request, same application). Otherwise hand over exactly as a replaced EMR
  cluster's launcher does (bootstrap/streaming-spark-submit.sh): write the stop
  marker (``handover requested ...``: the job stops gracefully and records a
  handover), wait up to ``StopTimeoutSec`` for every active run on the
  application to end and the lease to be free, ``CancelJobRun`` only the runs
  still active then, delete the marker, start the new run. The application is
  the instance's own, so every active run on it is a copy of this job (the
  deployed one, or one the supervisor restarted): none survives the handover,
  and the new run waits for the lease itself (model/lease.py), so two jobs
  never write one checkpoint. When the application's :data:`CONFIG_TAG` is
  not ``ConfigHash`` (the rollback of an application change reaches this
  resource before CloudFormation restores the application), the run is not
  started: the application is stopped so that CloudFormation can update it,
  the request is saved at ``PendingRunUri``, and the guard starts it once the
  application is back.
* Delete: the active runs this physical ID started (its tag; a run the
  supervisor restarted with this request, by the request's name; the run
  whose ID is a legacy physical ID) are stopped gracefully, then cancelled;
  then, when no run is left on the application, ``StopApplication`` and a
  wait for ``STOPPED``, because CloudFormation deletes the application next
  and DeleteApplication needs it ``CREATED`` or ``STOPPED``
  (https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_DeleteApplication.html).

``Custom::ServerlessApplicationGuard`` (the application ``DependsOn`` it, so
CloudFormation updates it BEFORE the application). Properties:
``ApplicationName``, ``ConfigHash``, ``Handover``. It
finds the application by its name (a reference would make a cycle):

* Update, the application's tag is not ``ConfigHash`` (CloudFormation updates
  the application next, and UpdateApplication needs it ``CREATED`` or
  ``STOPPED``,
  https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_UpdateApplication.html):
  save the running request at ``PendingRunUri``, stop the runs as a handover
  does, ``StopApplication``, wait for ``STOPPED``. The job-run resource, whose
  ``ConfigHash`` changed too, starts the new run after the application's
  update.
* Update, the tag is ``ConfigHash`` already (the rollback: CloudFormation
  restored the application before this resource): start the saved request
  when no run is active, so the rollback ends with one job on the old request.
* Create and Delete: nothing (no application yet; the application is deleted
  before it).

Everything is bounded inside Lambda's 15 minutes (the construct checks the
bounds fit, and the handler stops waiting 30 s before its own deadline).
The reply goes to CloudFormation's pre-signed URL
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html).
Custom resource properties arrive as strings
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requests.html):
:func:`typed_request` restores the request's integers and booleans.

Why a custom resource and not ``AWS::EMRServerless::JobRun``: that resource
has no retry policy and every property change replaces it, which starts the
new run BEFORE the old one is deleted (CloudFormation creates the replacement
first): two jobs on one checkpoint, and no graceful stop (docs/serverless.md).

Imports stdlib, boto3 (in the Lambda runtime; requirements-synth.txt for
synth) and the model's modules the construct stages with it (:data:`HANDLER_FILES`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import boto3
from botocore.config import Config

from infra.s3_keys import read_if_present
from model.lease import s3_lease_state
from model.storage_uri import parse_s3_uri

log = logging.getLogger()
log.setLevel(logging.INFO)

# Job run states (API JobRun): not yet ended, and ended.
ACTIVE_STATES: Final = (
    "SUBMITTED",
    "PENDING",
    "SCHEDULED",
    "RUNNING",
    "QUEUED",
    "CANCELLING",
)
ENDED_STATES: Final = frozenset({"SUCCESS", "FAILED", "CANCELLED"})
# Application states (API Application): stopped or never started, and gone.
STOPPABLE_DONE: Final = frozenset({"CREATED", "STOPPED"})
GONE_STATES: Final = frozenset({"TERMINATED"})
# Data.JobRunId while the run waits for its application (a rollback).
PENDING: Final = "pending"
JOB_RUN_TYPE: Final = "Custom::ServerlessJobRun"
GUARD_TYPE: Final = "Custom::ServerlessApplicationGuard"
# The application's tag naming its configuration (infra/serverless/app.py).
CONFIG_TAG: Final = "streaming:config-hash"
# The tag a run carries: the physical ID of the resource that started it.
OWNER_TAG: Final = "streaming:job-run-resource"
# What GetJobRun returns of a StartJobRun request (API JobRun, API StartJobRun).
REQUEST_FIELDS: Final = (
    "name",
    "mode",
    "executionTimeoutMinutes",
    "retryPolicy",
    "jobDriver",
    "configurationOverrides",
)
# Stop waiting this long before the function's own deadline, to reply.
REPLY_MARGIN_SEC: Final = 30.0
# This module, inside the Lambda's asset: the path it had before the serverless
# target became one package (infra/serverless/). The function's ``Handler`` is
# that path's import name and is written in every deployed template, so the
# asset keeps it and a move of the source changes no template;
# :data:`HANDLER_SOURCES` says where the file is in the repository.
HANDLER_MODULE_FILE: Final = "infra/serverless_job_run_handler.py"
# The asset's files, as the function imports them.
HANDLER_FILES: Final = (
    "model/__init__.py",
    "model/lease.py",
    "model/polling.py",
    "model/storage_uri.py",
    "infra/__init__.py",
    "infra/s3_keys.py",
    HANDLER_MODULE_FILE,
)
HANDLER_SOURCES: Final = {HANDLER_MODULE_FILE: "infra/serverless/job_run_handler.py"}
HANDLER: Final = "infra.serverless_job_run_handler.handler"

_INTEGER_PATHS: Final[tuple[tuple[str, ...], ...]] = (
    ("executionTimeoutMinutes",),
    ("retryPolicy", "maxFailedAttemptsPerHour"),
)
_BOOLEAN_PATHS: Final[tuple[tuple[str, ...], ...]] = (
    (
        "configurationOverrides",
        "monitoringConfiguration",
        "cloudWatchLoggingConfiguration",
        "enabled",
    ),
)


def typed_request(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` (a request as the custom resource receives it, every scalar a
    string) with its integers and booleans restored; a typed request comes
    back equal."""
    request: dict[str, Any] = json.loads(json.dumps(raw))
    for path in _INTEGER_PATHS:
        _convert(request, path, lambda value: int(str(value)))
    for path in _BOOLEAN_PATHS:
        _convert(request, path, lambda value: str(value).lower() == "true")
    return request


def _convert(request: dict[str, Any], path: tuple[str, ...], convert: Callable[[Any], Any]) -> None:
    node: Any = request
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and path[-1] in node:
        node[path[-1]] = convert(node[path[-1]])


@dataclass(frozen=True)
class Handover:
    lease_uri: str
    stop_marker_uri: str
    stop_timeout_sec: float
    cancel_timeout_sec: float = 120.0
    poll_sec: float = 5.0
    pending_run_uri: str = ""

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Handover:
        return cls(
            lease_uri=str(raw["LeaseUri"]),
            stop_marker_uri=str(raw["StopMarkerUri"]),
            stop_timeout_sec=float(raw["StopTimeoutSec"]),
            cancel_timeout_sec=float(raw.get("CancelTimeoutSec", 120)),
            poll_sec=float(raw.get("PollSec", 5)),
            pending_run_uri=str(raw.get("PendingRunUri", "")),
        )


@dataclass
class Clock:
    """Time, sleep and the function's deadline (epoch seconds); tests drive it."""

    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    deadline: float = float("inf")

    def left(self) -> float:
        return self.deadline - REPLY_MARGIN_SEC - self.now()


class JobRuns:
    """The job runs of one application, through the EMR Serverless API."""

    def __init__(self, client: Any, application_id: str) -> None:
        self.client, self.application_id = client, application_id

    def active(self, name: str | None = None) -> list[str]:
        """IDs of the runs not yet ended (of ``name`` only, when given)."""
        found: list[str] = []
        paginator = self.client.get_paginator("list_job_runs")
        try:
            for page in paginator.paginate(
                applicationId=self.application_id, states=list(ACTIVE_STATES)
            ):
                found += [
                    run["id"]
                    for run in page.get("jobRuns", ())
                    if name is None or run.get("name") == name
                ]
        except self.client.exceptions.ResourceNotFoundException:
            return []  # no run yet (moto says so; the service lists none)
        return found

    def state(self, run_id: str) -> str:
        try:
            reply = self.client.get_job_run(applicationId=self.application_id, jobRunId=run_id)
        except self.client.exceptions.ResourceNotFoundException:
            return "CANCELLED"  # nothing to stop
        return str(reply["jobRun"]["state"])

    def cancel(self, run_id: str) -> None:
        self.client.cancel_job_run(applicationId=self.application_id, jobRunId=run_id)

    def start(self, request: Mapping[str, Any], token: str, owner: str | None) -> str:
        body = dict(request, clientToken=token)
        if owner is not None:
            body["tags"] = {**dict(request.get("tags") or {}), OWNER_TAG: owner}
        return str(self.client.start_job_run(**body)["jobRunId"])

    def described(self, run_id: str) -> dict[str, Any]:
        reply = self.client.get_job_run(applicationId=self.application_id, jobRunId=run_id)
        return dict(reply["jobRun"])

    def started_by(self, owner: str, name: str) -> list[str]:
        """The active runs ``owner`` started: its tag, or no owner tag and
        the request's ``name`` (the supervisor's restarts of the request), or
        the run whose ID ``owner`` is (a physical ID of the run's ID)."""
        found = []
        for run_id in self.active():
            tags = self.described(run_id).get("tags") or {}
            if (
                tags.get(OWNER_TAG) == owner
                or run_id == owner
                or (OWNER_TAG not in tags and self.described(run_id).get("name") == name)
            ):
                found.append(run_id)
        return found

    def request_of(self, run_id: str) -> dict[str, Any]:
        """The StartJobRun request a run was started with (GetJobRun's fields)."""
        run = self.described(run_id)
        request: dict[str, Any] = {key: run[key] for key in REQUEST_FIELDS if key in run}
        if run.get("mode") == "STREAMING" and "retryPolicy" in request:
            # maxAttempts is BATCH's (API RetryPolicy): keep the streaming field only.
            request["retryPolicy"] = {
                key: value
                for key, value in request["retryPolicy"].items()
                if key == "maxFailedAttemptsPerHour"
            }
        tags = {k: v for k, v in (run.get("tags") or {}).items() if k != OWNER_TAG}
        if tags:
            request["tags"] = tags
        request["applicationId"] = self.application_id
        request["executionRoleArn"] = run["executionRole"]  # API JobRun's name for it
        return request


class Checkpoint:
    """The lease, the stop marker and the pending request, in S3."""

    def __init__(self, client: Any, handover: Handover) -> None:
        self.client, self.handover = client, handover

    def lease_held(self, now: float) -> bool:
        body = read_if_present(self.client, self.handover.lease_uri)
        return s3_lease_state(self.handover.lease_uri, body, now).running

    def ask_to_stop(self, why: str, now: float) -> None:
        bucket, key = parse_s3_uri(self.handover.stop_marker_uri)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
        self.client.put_object(Bucket=bucket, Key=key, Body=f"{why} {stamp}\n".encode())

    def clear_stop(self) -> None:
        """The new run must not see the old run's stop request."""
        bucket, key = parse_s3_uri(self.handover.stop_marker_uri)
        self.client.delete_object(Bucket=bucket, Key=key)

    def save_pending(self, request: Mapping[str, Any]) -> None:
        """The request to start once the application is back (a rollback)."""
        if self.handover.pending_run_uri:
            bucket, key = parse_s3_uri(self.handover.pending_run_uri)
            body = json.dumps(dict(request), sort_keys=True).encode()
            self.client.put_object(Bucket=bucket, Key=key, Body=body)

    def pending(self) -> dict[str, Any] | None:
        if not self.handover.pending_run_uri:
            return None
        body = read_if_present(self.client, self.handover.pending_run_uri)
        return None if body is None else dict(json.loads(body))

    def clear_pending(self) -> None:
        if self.handover.pending_run_uri:
            bucket, key = parse_s3_uri(self.handover.pending_run_uri)
            self.client.delete_object(Bucket=bucket, Key=key)


class Application:
    """One EMR Serverless application's state, tag and stop."""

    def __init__(self, client: Any, application_id: str) -> None:
        self.client, self.application_id = client, application_id

    @classmethod
    def named(cls, client: Any, name: str) -> Application | None:
        """The live application called ``name`` (names are the instance's own)."""
        paginator = client.get_paginator("list_applications")
        for page in paginator.paginate():
            for app in page.get("applications", ()):
                if app.get("name") == name and app.get("state") not in GONE_STATES:
                    return cls(client, str(app["id"]))
        return None

    def described(self) -> dict[str, Any]:
        reply = self.client.get_application(applicationId=self.application_id)
        return dict(reply["application"])

    def config_hash(self) -> str | None:
        found = (self.described().get("tags") or {}).get(CONFIG_TAG)
        return None if found is None else str(found)

    def state(self) -> str:
        try:
            return str(self.described()["state"])
        except self.client.exceptions.ResourceNotFoundException:
            return "TERMINATED"  # nothing to stop (a create that failed before it)

    def stop(self, clock: Clock, poll_sec: float) -> None:
        """``StopApplication`` and wait for ``STOPPED`` (bounded by the deadline)."""
        state = self.state()
        if state in GONE_STATES or state in STOPPABLE_DONE:
            return
        if state != "STOPPING":
            self.client.stop_application(applicationId=self.application_id)
        deadline = clock.now() + max(0.0, clock.left())
        while True:
            state = self.state()
            if state in STOPPABLE_DONE or state in GONE_STATES:
                log.info("application %s is %s", self.application_id, state)
                return
            if clock.now() >= deadline:
                raise TimeoutError(f"application {self.application_id} still {state}")
            clock.sleep(poll_sec)


def stop_runs(
    runs: JobRuns,
    checkpoint: Checkpoint,
    run_ids: Iterable[str],
    clock: Clock,
    *,
    why: str,
) -> list[str]:
    """Stop ``run_ids`` gracefully through the stop marker, wait a bounded
    time for them to end and the lease to be free, cancel what is left and
    wait for it to end. Returns the runs that had to be cancelled."""
    pending = [run_id for run_id in run_ids if runs.state(run_id) not in ENDED_STATES]
    if not pending:
        return []
    handover = checkpoint.handover
    checkpoint.ask_to_stop(why, clock.now())
    log.info("asked %s to stop (%s); waiting up to %.0fs", pending, why, handover.stop_timeout_sec)
    deadline = clock.now() + min(handover.stop_timeout_sec, max(0.0, clock.left()))
    while True:
        pending = [run_id for run_id in pending if runs.state(run_id) not in ENDED_STATES]
        if not pending and not checkpoint.lease_held(clock.now()):
            return []
        if not pending or clock.now() >= deadline:
            break
        clock.sleep(handover.poll_sec)
    for run_id in pending:
        log.warning("run %s still active after the graceful wait: cancelling it", run_id)
        runs.cancel(run_id)
    deadline = clock.now() + min(handover.cancel_timeout_sec, max(0.0, clock.left()))
    waiting = list(pending)
    while waiting:
        waiting = [run_id for run_id in waiting if runs.state(run_id) not in ENDED_STATES]
        if not waiting:
            break
        if clock.now() >= deadline:
            raise TimeoutError(f"job runs {waiting} did not end after CancelJobRun")
        clock.sleep(handover.poll_sec)
    return pending


def physical_id(event: Mapping[str, Any]) -> str:
    """The resource's one ID for its life: the one CloudFormation holds (every
    request but Create), else one derived from the stack and the logical ID,
    so that a retried Create gets the same."""
    held = event.get("PhysicalResourceId")
    if held and event["RequestType"] != "Create":
        return str(held)
    logical = str(event["LogicalResourceId"])
    digest = hashlib.sha256(f"{event['StackId']}/{logical}".encode()).hexdigest()[:16]
    return f"{logical}-{digest}"


def client_token(request: Mapping[str, Any], request_id: str) -> str:
    """StartJobRun's idempotency token: the request and the CloudFormation
    request it serves (at most 64 characters, API StartJobRun)."""
    body = json.dumps(dict(request), sort_keys=True)
    return hashlib.sha256(f"{body}\n{request_id}".encode()).hexdigest()


@dataclass(frozen=True)
class Result:
    physical_id: str
    data: dict[str, str] = field(default_factory=dict)


def _job_unchanged(event: Mapping[str, Any]) -> bool:
    """Only ``Handover`` changed (or nothing): the same run may go on."""
    old = event.get("OldResourceProperties") or {}
    new = event["ResourceProperties"]
    return typed_request(old.get("StartJobRun", {})) == typed_request(
        new["StartJobRun"]
    ) and old.get("ConfigHash") == new.get("ConfigHash")


def job_run(event: Mapping[str, Any], clients: Mapping[str, Any], clock: Clock) -> Result:
    """``Custom::ServerlessJobRun`` (the module's docstring)."""
    properties = event["ResourceProperties"]
    request = typed_request(properties["StartJobRun"])
    handover = Handover.of(properties["Handover"])
    emr = clients["emr-serverless"]
    runs = JobRuns(emr, str(request["applicationId"]))
    application = Application(emr, str(request["applicationId"]))
    checkpoint = Checkpoint(clients["s3"], handover)
    physical = physical_id(event)
    kind = event["RequestType"]
    if kind == "Delete":
        mine = runs.started_by(physical, str(request["name"]))
        stop_runs(runs, checkpoint, mine, clock, why="stop requested by the stack's delete")
        checkpoint.clear_pending()
        if not runs.active():
            application.stop(clock, handover.poll_sec)
        else:
            log.warning("runs of another resource are active: the application is left running")
        return Result(physical)
    if kind == "Update":
        active = runs.active()
        if active and _job_unchanged(event):
            log.info("Update changes only the handover settings: run %s goes on", active[0])
            return Result(physical, {"JobRunId": active[0]})
        stop_runs(runs, checkpoint, active, clock, why="handover requested")
    elif kind != "Create":
        raise ValueError(f"RequestType {kind!r}; allowed: Create, Update, Delete")
    wanted = properties.get("ConfigHash")
    if wanted is not None and application.config_hash() not in (None, str(wanted)):
        log.info("application not yet at configuration %s: stopping it, run pending", wanted)
        application.stop(clock, handover.poll_sec)
        checkpoint.save_pending(request)
        return Result(physical, {"JobRunId": PENDING})
    checkpoint.clear_stop()
    run_id = runs.start(request, client_token(request, str(event["RequestId"])), physical)
    checkpoint.clear_pending()
    log.info("%s: started job run %s (%s)", kind, run_id, request["name"])
    return Result(physical, {"JobRunId": run_id})


def application_guard(event: Mapping[str, Any], clients: Mapping[str, Any], clock: Clock) -> Result:
    """``Custom::ServerlessApplicationGuard`` (the module's docstring)."""
    physical = physical_id(event)
    if event["RequestType"] != "Update":
        return Result(physical)
    properties = event["ResourceProperties"]
    handover = Handover.of(properties["Handover"])
    emr = clients["emr-serverless"]
    application = Application.named(emr, str(properties["ApplicationName"]))
    if application is None:
        return Result(physical)
    runs = JobRuns(emr, application.application_id)
    checkpoint = Checkpoint(clients["s3"], handover)
    active = runs.active()
    if application.config_hash() != str(properties["ConfigHash"]):
        if active:
            checkpoint.save_pending(runs.request_of(active[0]))
        stop_runs(runs, checkpoint, active, clock, why="handover requested")
        application.stop(clock, handover.poll_sec)
        return Result(physical)
    pending = checkpoint.pending()
    if pending is not None and not active:
        checkpoint.clear_stop()
        run_id = runs.start(pending, client_token(pending, str(event["RequestId"])), None)
        checkpoint.clear_pending()
        log.info("started the pending request again: run %s", run_id)
    return Result(physical)


HANDLERS: Final = {
    JOB_RUN_TYPE: job_run,
    GUARD_TYPE: application_guard,
}


def handle(event: Mapping[str, Any], clients: Mapping[str, Any], clock: Clock) -> Result:
    """Carry out one CloudFormation request of either resource type."""
    kind = str(event.get("ResourceType", JOB_RUN_TYPE))
    if kind not in HANDLERS:
        raise ValueError(f"ResourceType {kind!r}; allowed: {', '.join(HANDLERS)}")
    return HANDLERS[kind](event, clients, clock)


def reply(
    event: Mapping[str, Any], status: str, physical_id: str, reason: str, data: Mapping[str, str]
) -> None:
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason[:3000],
            "PhysicalResourceId": physical_id,
            "StackId": event["StackId"],
            "RequestId": event["RequestId"],
            "LogicalResourceId": event["LogicalResourceId"],
            "Data": dict(data),
        }
    ).encode()
    put = urllib.request.Request(
        str(event["ResponseURL"]),
        data=body,
        method="PUT",
        headers={"Content-Type": "", "Content-Length": str(len(body))},
    )
    with urllib.request.urlopen(put, timeout=30) as answer:
        log.info("reply %s: HTTP %s", status, answer.status)


def _clients() -> dict[str, Any]:

    config = Config(connect_timeout=5, read_timeout=20, retries={"max_attempts": 5})
    return {name: boto3.client(name, config=config) for name in ("emr-serverless", "s3")}


def handler(event: Mapping[str, Any], context: Any) -> None:
    deadline = time.time() + context.get_remaining_time_in_millis() / 1000
    physical = physical_id(event)
    try:
        result = handle(event, _clients(), Clock(deadline=deadline))
    except Exception as exc:  # every failure must reach CloudFormation, or it waits an hour
        log.exception("%s failed", event.get("RequestType"))
        reply(event, "FAILED", physical, f"{type(exc).__name__}: {exc}", {})
        return
    reply(event, "SUCCESS", result.physical_id, "", result.data)
