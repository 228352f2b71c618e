"""moto's EMR Serverless, patched where a streaming job run needs the service's
behaviour (as :mod:`local.moto_server` patches Kinesis resharding).

moto 5.2.5 deviates from EMR Serverless in what the job run's tests read:

* ``CreateApplication`` accepts only ``emr-X.Y.0`` labels: ``emr-spark-8.1.0``
  (the release the stack deploys) is refused as "does not exist";
* ``StartJobRun`` drops ``mode`` and ``retryPolicy`` and turns
  ``executionTimeoutMinutes`` 0 (a streaming run's "no timeout") into 720;
  ``GetJobRun`` therefore returns neither, nor the run's ``attempt``;
* a started run is in ``SUCCESS`` at once and never changes: there is no
  ``RUNNING`` and no retry of a failed attempt;
* an application is created ``STARTED`` (the service creates it ``CREATED``),
  ``StartJobRun`` neither auto-starts it nor is idempotent on ``clientToken``,
  and ``StopApplication`` stops it with runs still active, so a stack that
  would fail on AWS (an UpdateApplication or DeleteApplication while the job
  keeps the application ``STARTED``) passes against stock moto.

:func:`patch_emr_serverless` fixes exactly those: the label pattern takes the
``emr-spark-X.Y.Z`` releases; ``mode``, ``retryPolicy`` and a 0 timeout are kept
and returned with ``attempt`` / ``attemptCreatedAt``; a run starts ``RUNNING``;
and :func:`end_attempt` (what the driver's exit does on the service) applies
the retry policy: status 0 ends the run ``SUCCESS``; a failed attempt of a
STREAMING run is retried (``attempt`` + 1, ``RUNNING`` again, and the
``on_retry`` callbacks run) while the failed attempts of the last hour stay
within ``maxFailedAttemptsPerHour``, else the run ends ``FAILED``; a BATCH run
is retried up to ``maxAttempts``. What the service does is from the UG "Job
resiliency" page
(https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/jobs-resiliency.html:
streaming runs are retried by default, 5 failed attempts an hour unless set,
1-10, and 1 means no retry; batch runs only with ``maxAttempts``) and "Job run
states" (job-states.html). ``CancelJobRun`` stays stock (``CANCELLED`` at once).

The application's lifecycle, as the API reference states it: an application
is created ``CREATED``
(https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/applications.html,
"Application states"); ``StartJobRun`` on a ``CREATED`` or ``STOPPED``
application with auto-start on starts it (same page, and
https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/app-behavior.html),
and a repeated ``clientToken`` returns the run it started instead of a second
one ("The client idempotency token of the job run to start",
https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_StartJobRun.html);
``StopApplication`` is refused while a run is scheduled or running ("All
scheduled and running jobs must be completed or cancelled before stopping an
application",
https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_StopApplication.html)
and goes through ``STOPPING``: the application shows ``STOPPED`` from the next
``GetApplication`` on, so a caller that deletes or updates it without waiting
fails as it would on AWS; ``UpdateApplication`` and ``DeleteApplication`` need
``CREATED`` or ``STOPPED``
(https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_UpdateApplication.html,
https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_DeleteApplication.html;
moto checks these two itself, against the states above).

In-process (``moto.mock_aws``) tests call :func:`patch_emr_serverless` (or use
:func:`patched`, which undoes it) and :func:`end_attempt`; ``python -m
local.moto_server`` applies the patch too.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from moto.core.responses import ActionResult
from moto.core.utils import utcnow
from moto.emrserverless import models, responses
from moto.emrserverless.exceptions import ValidationException
from moto.emrserverless.models import emrserverless_backends

# UG "Job resiliency": the default for streaming runs and the allowed range.
DEFAULT_FAILED_ATTEMPTS_PER_HOUR: Final = 5
MAX_FAILED_ATTEMPTS_PER_HOUR: Final = 10
MODES: Final = ("BATCH", "STREAMING")
RUNNING: Final = "RUNNING"
SUCCESS: Final = "SUCCESS"
FAILED: Final = "FAILED"
CREATED: Final = "CREATED"
STARTED: Final = "STARTED"
STOPPING: Final = "STOPPING"
STOPPED: Final = "STOPPED"
# Job run states that keep an application from stopping (API JobRun, job-states.html).
ACTIVE_RUN_STATES: Final = frozenset(
    {"SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "QUEUED", "CANCELLING"}
)
_RELEASE: Final = re.compile(r"emr-(spark-)?[0-9]+\.[0-9]{1,2}\.[0-9]+(-[0-9]{8})?$")
_HOUR_SEC: Final = 3600.0

# Called with the run when it starts (StartJobRun), after each retry starts,
# and when it is cancelled (CancelJobRun): local/serverless_runs.py runs the
# job's processes from them.
on_start: list[Callable[[Any], None]] = []
on_retry: list[Callable[[Any], None]] = []
on_cancel: list[Callable[[Any], None]] = []
_saved: dict[str, Any] = {}


def _validation(message: str) -> Exception:
    return ValidationException(message)


def _create_application(original: Callable[..., Any]) -> Callable[..., Any]:
    def create_application(self: Any, *args: Any, **kwargs: Any) -> Any:
        label = kwargs.get("release_label", args[1] if len(args) > 1 else "")
        if isinstance(label, str) and label.startswith("emr-spark-"):
            if not _RELEASE.match(label):
                raise _validation(f"release label {label!r} does not exist")
            # moto's own pattern knows emr-X.Y.0 only: pass one, then set the real label.
            kwargs = dict(kwargs)
            if "release_label" in kwargs:
                kwargs["release_label"] = "emr-7.1.0"
            else:
                args = (args[0], "emr-7.1.0", *args[2:])
            application = original(self, *args, **kwargs)
            application.release_label = label
            application.state = CREATED
            return application
        application = original(self, *args, **kwargs)
        application.state = CREATED
        return application

    return create_application


def _start_job_run_response(original: Callable[..., Any]) -> Callable[..., Any]:
    """The response handler: read what moto drops, validate it, keep it on the run."""

    def start_job_run(self: Any) -> Any:
        mode = self._get_param("mode") or "BATCH"
        policy = self._get_param("retryPolicy") or {}
        timeout = self._get_param("executionTimeoutMinutes")
        if mode not in MODES:
            raise _validation(f"mode {mode!r}: allowed {', '.join(MODES)}")
        if mode == "STREAMING" and "maxAttempts" in policy:
            raise _validation("retryPolicy.maxAttempts applies to BATCH mode only")
        if mode == "BATCH" and "maxFailedAttemptsPerHour" in policy:
            raise _validation("retryPolicy.maxFailedAttemptsPerHour applies to STREAMING mode only")
        per_hour = policy.get("maxFailedAttemptsPerHour", DEFAULT_FAILED_ATTEMPTS_PER_HOUR)
        if not 1 <= int(per_hour) <= MAX_FAILED_ATTEMPTS_PER_HOUR:
            raise _validation(f"retryPolicy.maxFailedAttemptsPerHour {per_hour}: allowed 1-10")
        backend = self.emrserverless_backend
        application_id = self._get_param("applicationId")
        backend.get_application(application_id)  # ResourceNotFoundException when unknown
        application = backend.applications[application_id]
        token = self._get_param("clientToken")
        for earlier in backend.job_runs.get(application.id, []):
            if token and earlier.client_token == token:
                return ActionResult(
                    {"applicationId": application.id, "jobRunId": earlier.id, "arn": earlier.arn}
                )
        _check_startable(application)
        result = original(self)
        application.state = STARTED
        run = backend.get_job_run(self._get_param("applicationId"), result.result["jobRunId"])
        run.mode = mode
        if mode == "STREAMING":
            run.retry_policy = {"maxFailedAttemptsPerHour": int(per_hour)}
        else:
            run.retry_policy = {"maxAttempts": int(policy.get("maxAttempts", 1))}
        if timeout is not None and int(timeout) == 0:
            run.execution_timeout_minutes = 0
        run.state = RUNNING
        run.attempt = 1
        run.attempt_created_at = run.created_at
        run.failed_attempts_at = []
        for callback in list(on_start):
            callback(run)
        return result

    return start_job_run


def _check_startable(application: Any) -> None:
    """A submitted run starts a CREATED or STOPPED application only with auto-start on."""
    stopped = application.state in (CREATED, STOPPED, STOPPING)
    if stopped and not application.auto_start_configuration.get("enabled", True):
        raise _validation(
            f"Application {application.id} is {application.state} and auto-start is off"
        )


def _stop_application(original: Callable[..., Any]) -> Callable[..., Any]:
    def stop_application(self: Any, application_id: str) -> None:
        application = self.get_application(application_id)
        active = [
            run.id
            for run in self.job_runs.get(application_id, [])
            if run.state in ACTIVE_RUN_STATES
        ]
        if active:
            raise _validation(
                f"Application {application_id} has active job runs {active}: all scheduled "
                "and running jobs must be completed or cancelled before stopping it"
            )
        original(self, application_id)
        application.state = STOPPING

    return stop_application


def _get_application(original: Callable[..., Any]) -> Callable[..., Any]:
    def get_application(self: Any, application_id: str) -> Any:
        application = original(self, application_id)
        if application.state == STOPPING:
            application.state = STOPPED  # the stop completes by the next look
            return _Shown(application, STOPPING)
        return application

    return get_application


class _Shown:
    """The application as one reply shows it (a state it has just left)."""

    def __init__(self, application: Any, state: str) -> None:
        self._application, self.state = application, state

    def __getattr__(self, name: str) -> Any:
        return getattr(self._application, name)


def _cancel_job_run(original: Callable[..., Any]) -> Callable[..., Any]:
    def cancel_job_run(self: Any, application_id: str, job_run_id: str) -> Any:
        result = original(self, application_id, job_run_id)
        run = self.get_job_run(application_id, job_run_id)
        for callback in list(on_cancel):
            callback(run)
        return result

    return cancel_job_run


def patch_emr_serverless() -> None:
    """Apply the patches (idempotent)."""
    if _saved:
        return
    _saved["create_application"] = models.EMRServerlessBackend.create_application
    _saved["start_job_run"] = responses.EMRServerlessResponse.start_job_run
    _saved["cancel_job_run"] = models.EMRServerlessBackend.cancel_job_run
    _saved["stop_application"] = models.EMRServerlessBackend.stop_application
    _saved["get_application"] = models.EMRServerlessBackend.get_application
    models.EMRServerlessBackend.stop_application = _stop_application(  # type: ignore[method-assign]
        _saved["stop_application"]
    )
    models.EMRServerlessBackend.get_application = _get_application(  # type: ignore[method-assign]
        _saved["get_application"]
    )
    models.EMRServerlessBackend.cancel_job_run = _cancel_job_run(  # type: ignore[method-assign]
        _saved["cancel_job_run"]
    )
    models.EMRServerlessBackend.create_application = _create_application(  # type: ignore[method-assign]
        _saved["create_application"]
    )
    responses.EMRServerlessResponse.start_job_run = _start_job_run_response(  # type: ignore[method-assign]
        _saved["start_job_run"]
    )


def unpatch_emr_serverless() -> None:
    if not _saved:
        return
    models.EMRServerlessBackend.create_application = _saved.pop("create_application")  # type: ignore[method-assign]
    responses.EMRServerlessResponse.start_job_run = _saved.pop("start_job_run")  # type: ignore[method-assign]
    models.EMRServerlessBackend.cancel_job_run = _saved.pop("cancel_job_run")  # type: ignore[method-assign]
    models.EMRServerlessBackend.stop_application = _saved.pop("stop_application")  # type: ignore[method-assign]
    models.EMRServerlessBackend.get_application = _saved.pop("get_application")  # type: ignore[method-assign]


@contextmanager
def patched() -> Iterator[None]:
    patch_emr_serverless()
    try:
        yield
    finally:
        unpatch_emr_serverless()
        for callbacks in (on_start, on_retry, on_cancel):
            callbacks.clear()


def end_attempt(run: Any, status: int, *, detail: str = "", now: float | None = None) -> str:
    """The run's current attempt ended with process status ``status``: the state
    the service then shows (``SUCCESS``, ``RUNNING`` for a retry, ``FAILED``)."""
    if getattr(run, "state", None) != RUNNING:
        raise ValueError(f"job run {run.id}: in {run.state}, expected RUNNING")
    moment = time.time() if now is None else now
    if status == 0:
        run.state, run.state_details = SUCCESS, ""
        return SUCCESS
    failed: list[float] = run.failed_attempts_at
    failed.append(moment)
    recent = [at for at in failed if moment - at < _HOUR_SEC]
    if run.mode == "STREAMING":
        retry = len(recent) < run.retry_policy["maxFailedAttemptsPerHour"]
    else:
        retry = run.attempt < run.retry_policy["maxAttempts"]
    if not retry:
        run.state = FAILED
        run.state_details = detail or f"attempt {run.attempt} exited with status {status}"
        return FAILED
    run.attempt += 1

    run.attempt_created_at = utcnow()
    for callback in list(on_retry):
        callback(run)
    return RUNNING


def job_run(application_id: str, job_run_id: str, account: str, region: str) -> Any:
    """moto's run object (in-process backends)."""
    return emrserverless_backends[account][region].get_job_run(application_id, job_run_id)
