"""``Custom::ServerlessJobRun``: the Lambda that starts, hands over and stops
the instance's EMR Serverless streaming job run (docs/serverless.md, "The job
run").

Properties: ``StartJobRun`` (the request of infra/serverless_job_run.py, as
``start_job_run`` takes it) and ``Handover`` (``LeaseUri``, ``StopMarkerUri``,
``StopTimeoutSec``, ``CancelTimeoutSec``).

* Create: delete a stale stop marker, then ``StartJobRun``. The physical ID is
  the run's ID.
* Update (any change of the job): hand over exactly as a replaced EMR cluster's
  launcher does (bootstrap/streaming-spark-submit.sh): write the stop marker
  (``handover requested ...``: the job stops gracefully and records a
  handover), wait up to ``StopTimeoutSec`` for every active run on the
  application to end and the lease to be free, ``CancelJobRun`` only the runs
  still active then, delete the marker, start the new run. The application is
  the instance's own, so every active run on it is a copy of this job
  (the deployed one, or one the supervisor restarted): none survives the
  handover, and the new run waits for the lease itself (model/lease.py), so two
  jobs never write one checkpoint.
* Delete: the runs of THIS request (by its name, unique per request body) that
  are still active are stopped gracefully, then cancelled. After an update,
  CloudFormation deletes the previous physical ID with the previous properties:
  its runs ended in the handover, so nothing is written and nothing else is
  touched.

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

import json
import logging
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
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
NOT_STARTED: Final = "not-started"
# Stop waiting this long before the function's own deadline, to reply.
REPLY_MARGIN_SEC: Final = 30.0
HANDLER_FILES: Final = (
    "model/__init__.py",
    "model/lease.py",
    "model/polling.py",
    "model/storage_uri.py",
    "infra/__init__.py",
    "infra/s3_keys.py",
    "infra/serverless_job_run_handler.py",
)
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

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> Handover:
        return cls(
            lease_uri=str(raw["LeaseUri"]),
            stop_marker_uri=str(raw["StopMarkerUri"]),
            stop_timeout_sec=float(raw["StopTimeoutSec"]),
            cancel_timeout_sec=float(raw.get("CancelTimeoutSec", 120)),
            poll_sec=float(raw.get("PollSec", 5)),
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

    def start(self, request: Mapping[str, Any]) -> str:
        return str(self.client.start_job_run(**request)["jobRunId"])


class Checkpoint:
    """The lease and the stop marker, in S3."""

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


def handle(event: Mapping[str, Any], clients: Mapping[str, Any], clock: Clock) -> str:
    """Carry out one CloudFormation request; returns the physical ID."""
    properties = event["ResourceProperties"]
    request = typed_request(properties["StartJobRun"])
    handover = Handover.of(properties["Handover"])
    runs = JobRuns(clients["emr-serverless"], str(request["applicationId"]))
    checkpoint = Checkpoint(clients["s3"], handover)
    kind = event["RequestType"]
    if kind == "Delete":
        physical = str(event.get("PhysicalResourceId", NOT_STARTED))
        mine = runs.active(name=str(request["name"]))
        stop_runs(runs, checkpoint, mine, clock, why="stop requested by the stack's delete")
        return physical
    if kind == "Update":
        stop_runs(runs, checkpoint, runs.active(), clock, why="handover requested")
    elif kind != "Create":
        raise ValueError(f"RequestType {kind!r}; allowed: Create, Update, Delete")
    checkpoint.clear_stop()
    run_id = runs.start(request)
    log.info("%s: started job run %s (%s)", kind, run_id, request["name"])
    return run_id


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
    physical = str(event.get("PhysicalResourceId", NOT_STARTED))
    try:
        physical = handle(event, _clients(), Clock(deadline=deadline))
    except Exception as exc:  # every failure must reach CloudFormation, or it waits an hour
        log.exception("%s failed", event.get("RequestType"))
        reply(event, "FAILED", physical, f"{type(exc).__name__}: {exc}", {})
        return
    reply(event, "SUCCESS", physical, "", {"JobRunId": physical})
