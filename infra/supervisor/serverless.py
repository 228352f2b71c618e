"""The supervisor of a ``"compute": "serverless"`` instance: the same
:func:`~infra.supervisor.decision.decide`, observed from the job's lease, its
exit record and the application's job runs, and a restart that is
``StartJobRun`` of the stack's own request (infra/serverless_job_run.py).

The service and the supervisor do not fight:

* the service retries a failed attempt inside the same run
  (``retryPolicy.maxFailedAttemptsPerHour``, from the checkpoint; UG
  jobs-resiliency): while any run of the application is SUBMITTED, PENDING,
  SCHEDULED, RUNNING, QUEUED or CANCELLING, a start is under way
  (``start_pending``) and ``decide`` waits; the supervisor acts only once no
  run is active and the lease is free, i.e. when the service has given up
  (the run ended FAILED) or the run ended otherwise;
* the budget: the service gets all but one of the instance's
  ``supervisor.max_restarts_per_hour`` as its attempts, the supervisor the
  last as its restarts (``restart_budget_split``);
* exit 2 (a refused configuration or checkpoint): the job writes its exit
  record and ends the run so the service does not retry it (B2's side);
  ``decide`` reads the record and alarms at once, never restarting
  (``app.contract.UNRECOVERABLE_EXITS``);
* ``make stop-job``: the record says stopped on request by an operator;
  ``decide`` leaves it stopped.

The trigger is the supervisor's schedule (EventBridge ``rate``), not the
"EMR Serverless Job Run State Change" events: EventBridge lists no delivery
guarantee for EMR Serverless, and a service not listed is best effort ("in
some rare cases an event might not be delivered",
https://docs.aws.amazon.com/eventbridge/latest/userguide/event-types.html); a
schedule re-checks every minute and needs no event to have arrived.

Entry point :func:`handler`; configuration from the environment the
construct sets (infra/constructs/serverless_supervisor.py). Its state, alarm
and metrics go through ``handler.act`` (the EMR supervisor's), so ``make
status`` reads them alike.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from app.exit_record import ExitRecordError, read_exit_record
from app.lease import lease_path, s3_lease_state
from app.storage_uri import parse_s3_uri
from infra.supervisor import handler as emr_handler
from infra.supervisor.decision import ClusterState, Decision, Observation, Policy, decide

log = logging.getLogger()
log.setLevel(logging.INFO)

ENV_INSTANCE: Final = emr_handler.ENV_INSTANCE
ENV_CHECKPOINT: Final = emr_handler.ENV_CHECKPOINT
ENV_STATE: Final = emr_handler.ENV_STATE
ENV_POLICY: Final = emr_handler.ENV_POLICY
ENV_TOPIC: Final = emr_handler.ENV_TOPIC
ENV_APPLICATION_ID: Final = "APPLICATION_ID"
ENV_REQUEST: Final = "START_JOB_RUN"
HANDLER: Final = "infra.supervisor.serverless.handler"

# API JobRun states: a run in one of these is up or under way (the service
# starts it, runs it, or retries it within its policy).
ACTIVE_RUN_STATES: Final = ("SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "QUEUED", "CANCELLING")
# API Application states: a terminated application cannot run the job.
APPLICATION_GONE: Final = frozenset({"TERMINATED"})
APPLICATION_STARTING: Final = frozenset({"CREATING"})


@dataclass(frozen=True)
class ServerlessSettings:
    instance: str
    application_id: str
    checkpoint_uri: str
    state_uri: str
    request: dict[str, Any]
    policy: Policy
    topic_arn: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ServerlessSettings:
        required = (ENV_INSTANCE, ENV_APPLICATION_ID, ENV_CHECKPOINT, ENV_STATE, ENV_REQUEST)
        missing = [name for name in required if not env.get(name)]
        if missing:
            raise ValueError(f"environment: {missing[0]} is not set; the construct sets it")
        request = json.loads(env[ENV_REQUEST])
        if not isinstance(request, dict) or request.get("mode") != "STREAMING":
            raise ValueError(f"environment: {ENV_REQUEST} is not a STREAMING StartJobRun request")
        return cls(
            instance=env[ENV_INSTANCE],
            application_id=env[ENV_APPLICATION_ID],
            checkpoint_uri=env[ENV_CHECKPOINT],
            state_uri=env[ENV_STATE],
            request=request,
            policy=Policy(**json.loads(env.get(ENV_POLICY) or "{}")),
            topic_arn=env.get(ENV_TOPIC, ""),
        )

    def as_emr(self) -> emr_handler.Settings:
        """The fields ``handler.act`` reads for the state, the alarm and the metrics."""
        return emr_handler.Settings(
            instance=self.instance,
            cluster_id=self.application_id,
            checkpoint_uri=self.checkpoint_uri,
            state_uri=self.state_uri,
            step={},
            policy=self.policy,
            topic_arn=self.topic_arn,
        )


def _runs(client: Any, settings: ServerlessSettings) -> tuple[ClusterState, str, bool]:
    """(application state, detail, a run is active) from the EMR Serverless API."""
    app = client.get_application(applicationId=settings.application_id)["application"]
    state = str(app["state"])
    if state in APPLICATION_GONE:
        detail = f"{settings.application_id} {state} {app.get('stateDetails', '')}".strip()
        return "gone", detail, False
    if state in APPLICATION_STARTING:
        return "starting", state, False
    try:
        page = client.list_job_runs(
            applicationId=settings.application_id, states=list(ACTIVE_RUN_STATES)
        )
    except client.exceptions.ResourceNotFoundException:
        return "ready", state, False  # no run yet (moto's answer; the service lists none)
    return "ready", state, bool(page.get("jobRuns"))


def observe(s3: Any, emr_serverless: Any, settings: ServerlessSettings, now: float) -> Observation:
    lease = lease_path(settings.checkpoint_uri)
    bucket, key = parse_s3_uri(lease)
    try:
        body: bytes | None = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        body = None
    try:
        record = read_exit_record(settings.checkpoint_uri, s3)
    except ExitRecordError as exc:  # a record we cannot read explains nothing
        log.warning("%s", exc)
        record = None
    application, detail, active = _runs(emr_serverless, settings)
    return Observation(
        now=now,
        running=s3_lease_state(lease, body, now).running,
        exit=record,
        start_pending=active,
        cluster=application,
        cluster_detail=detail,
    )


def act(
    decision: Decision, clients: Mapping[str, Any], settings: ServerlessSettings, now: float
) -> None:
    """A restart is the stack's own request again; the rest (alarm, state,
    metrics) is the EMR supervisor's ``act``."""
    if decision.action == "restart":
        reply = clients["emr-serverless"].start_job_run(**settings.request)
        log.warning(
            "restarted %s: job run %s; %s", settings.instance, reply["jobRunId"], decision.message
        )
        decision = replace(decision, action="none")
    emr_handler.act(decision, clients, settings.as_emr(), now)


def check(clients: Mapping[str, Any], settings: ServerlessSettings, now: float) -> Decision:
    """One check: observe, decide (the one rule), act."""
    observation = observe(clients["s3"], clients["emr-serverless"], settings, now)
    decision = decide(
        observation, emr_handler.load_state(clients["s3"], settings.as_emr()), settings.policy
    )
    act(decision, clients, settings, now)
    return decision


def _clients() -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 3})
    names = ("s3", "emr-serverless", "sns", "cloudwatch")
    return {name: boto3.client(name, config=config) for name in names}


def handler(_event: object, _context: object) -> dict[str, str]:
    decision = check(_clients(), ServerlessSettings.from_env(os.environ), time.time())
    return {"action": decision.action, "reason": decision.reason, "message": decision.message}
