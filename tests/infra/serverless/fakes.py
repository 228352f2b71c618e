"""Shared stand-ins for the job-run resource's tests: the job (:class:`FakeJob`)
and CloudFormation's requests (:func:`event`), against in-process moto with
the patched EMR Serverless (local/serverless_moto.py: runs start RUNNING,
applications are created CREATED and keep STARTED while a run is active).

The fake job plays model/graceful_stop.py: a RUNNING run holds the lease;
when it sees the stop marker (if ``obeys``) its attempt ends with status 0 and
the lease is released. Time is the test's clock: no sleeps."""

from __future__ import annotations

import json
from typing import Any

from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.emrserverless.models import emrserverless_backends

from infra.serverless.job_run_handler import Clock
from local import serverless_moto as sm

REGION = "eu-west-1"
BUCKET = "data-bucket"
LEASE = f"s3://{BUCKET}/checkpoints/orders-eu-west-1/_lease"
MARKER = f"s3://{BUCKET}/control/orders-eu-west-1/stop"
PENDING = f"s3://{BUCKET}/control/orders-eu-west-1/pending-run.json"
ROLE = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/job"
STACK_ID = f"arn:aws:cloudformation:{REGION}:{DEFAULT_ACCOUNT_ID}:stack/s/1"


def _key(uri: str) -> str:
    return uri.split("/", 3)[3]


class FakeJob:
    """The job side of every run of one application."""

    def __init__(self, s3: Any, application_id: str) -> None:
        self.s3, self.application_id = s3, application_id
        self.obeys = True
        self.now = 1_000_000.0
        self.sleeps = 0

    def runs(self) -> list[Any]:
        backend = emrserverless_backends[DEFAULT_ACCOUNT_ID][REGION]
        runs: list[Any] = backend.job_runs.get(self.application_id, [])
        return runs

    def running(self) -> list[Any]:
        return [run for run in self.runs() if run.state == "RUNNING"]

    def start_running(self) -> None:
        """A RUNNING run's job takes the lease."""
        if self.running():
            body = json.dumps({"owner": "driver:1", "expires_at": self.now + 30})
            self.s3.put_object(Bucket=BUCKET, Key=_key(LEASE), Body=body.encode())

    def marker(self) -> bool:
        found = self.s3.list_objects_v2(Bucket=BUCKET, Prefix=_key(MARKER))
        return bool(found.get("KeyCount"))

    def sleep(self, seconds: float) -> None:
        self.sleeps += 1
        self.now += seconds
        if self.obeys and self.marker():
            for run in self.running():
                sm.end_attempt(run, 0, now=self.now)
            self.s3.delete_object(Bucket=BUCKET, Key=_key(LEASE))

    def clock(self) -> Clock:
        return Clock(now=lambda: self.now, sleep=self.sleep, deadline=self.now + 900)

    def states(self) -> list[str]:
        return [run.state for run in self.runs()]


def request(application_id: str, name: str = "streaming-orders-v1") -> dict[str, Any]:
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


def handover(stop_timeout: str = "420") -> dict[str, str]:
    return {
        "LeaseUri": LEASE,
        "StopMarkerUri": MARKER,
        "PendingRunUri": PENDING,
        "StopTimeoutSec": stop_timeout,
        "CancelTimeoutSec": "120",
    }


def event(
    kind: str,
    properties: dict[str, Any],
    physical: str | None = None,
    *,
    old: dict[str, Any] | None = None,
    resource_type: str = "Custom::ServerlessJobRun",
    logical_id: str = "JobRun",
    request_id: str = "r-1",
) -> dict[str, Any]:
    """One CloudFormation request (crpg-ref-requests.html): Update carries
    ``OldResourceProperties``, every request but Create the physical ID."""
    found: dict[str, Any] = {
        "RequestType": kind,
        "ResourceType": resource_type,
        "StackId": STACK_ID,
        "LogicalResourceId": logical_id,
        "RequestId": request_id,
        "ResourceProperties": properties,
    }
    if physical is not None:
        found["PhysicalResourceId"] = physical
    if old is not None:
        found["OldResourceProperties"] = old
    return found
