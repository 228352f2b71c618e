"""The serverless restart target of the supervisor (infra/supervisor/handler.py):
for a ``"compute": "serverless"`` instance the same check (the lease, the exit
record and the operator's stop marker, each read by ``infra.s3_keys.read_if_present``;
the same :func:`~infra.supervisor.decision.decide`; the same state, alarm and
metrics), with the platform part from the application and its job runs, and a
restart that is ``StartJobRun`` of the stack's own request
(infra/serverless/job_run.py).

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
  record and ends the run so the service does not retry it (job/outcome.py, ``process_status``);
  ``decide`` reads the record and alarms at once, never restarting
  (``model.contract.UNRECOVERABLE_EXITS``);
* ``make stop-job``: the record says stopped on request by an operator, or,
  when the job died before writing it, the operator's stop marker is still
  there (``Observation.stop_requested``); ``decide`` leaves it stopped.

The trigger is the supervisor's schedule (EventBridge ``rate``), not the
"EMR Serverless Job Run State Change" events: EventBridge lists no delivery
guarantee for EMR Serverless, and a service not listed is best effort ("in
some rare cases an event might not be delivered",
https://docs.aws.amazon.com/eventbridge/latest/userguide/event-types.html); a
schedule re-checks every minute and needs no event to have arrived.

Entry point :func:`handler`; configuration from the environment the
construct sets (infra/supervisor/construct.py, ``ServerlessRunTarget``): the
EMR supervisor's variables but ``CLUSTER_ID`` and ``STEP``, plus
``APPLICATION_ID`` and ``START_JOB_RUN``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from infra.supervisor.decision import ClusterState
from infra.supervisor.handler import env_object, run

ENV_APPLICATION_ID: Final = "APPLICATION_ID"
ENV_REQUEST: Final = "START_JOB_RUN"
HANDLER: Final = "infra.supervisor.serverless.handler"

# API JobRun states: a run in one of these is up or under way (the service
# starts it, runs it, or retries it within its policy).
ACTIVE_RUN_STATES: Final = ("SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "QUEUED", "CANCELLING")
# API Application states: a terminated application cannot run the job.
APPLICATION_GONE: Final = frozenset({"TERMINATED"})
APPLICATION_STARTING: Final = frozenset({"CREATING"})


def _streaming(request: dict[str, Any]) -> bool:
    return request.get("mode") == "STREAMING"


@dataclass(frozen=True)
class ServerlessRun:
    """The serverless target (``handler.Target``): the stack's own
    StartJobRun request on the instance's application."""

    application_id: str
    request: dict[str, Any]
    CLIENT: ClassVar[str] = "emr-serverless"
    REQUIRED: ClassVar[tuple[str, ...]] = (ENV_APPLICATION_ID, ENV_REQUEST)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ServerlessRun:
        request = env_object(env, ENV_REQUEST, _streaming, "a STREAMING StartJobRun request")
        return cls(application_id=env[ENV_APPLICATION_ID], request=request)

    @property
    def version(self) -> str | None:
        """Not compared here: the job-run resource's own rollback (an Update
        with the old request) restarts the old request (infra/serverless/job_run.py)."""
        return None

    @property
    def stack_arn(self) -> str:
        return ""

    def state(self, client: Any) -> tuple[ClusterState, str, bool]:
        """(application state, detail, a run is active) from the EMR Serverless API."""
        app = client.get_application(applicationId=self.application_id)["application"]
        state = str(app["state"])
        if state in APPLICATION_GONE:
            detail = f"{self.application_id} {state} {app.get('stateDetails', '')}".strip()
            return "gone", detail, False
        if state in APPLICATION_STARTING:
            return "starting", state, False
        try:
            page = client.list_job_runs(
                applicationId=self.application_id, states=list(ACTIVE_RUN_STATES)
            )
        except client.exceptions.ResourceNotFoundException:
            return "ready", state, False  # no run yet (moto's answer; the service lists none)
        return "ready", state, bool(page.get("jobRuns"))

    def restart(self, client: Any) -> str:
        reply = client.start_job_run(**self.request)
        return f"job run {reply['jobRunId']}"


def handler(_event: object, _context: object) -> dict[str, str]:
    return run(ServerlessRun)
