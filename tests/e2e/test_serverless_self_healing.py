"""Self-healing on EMR Serverless, end to end against the patched emulator:
a killed job run is retried and restarted, and an operator's stop is kept.

Everything real but the service: the stack's custom resource handler
(infra/serverless/job_run_handler.py) starts and hands over the job run; the
patched EMR Serverless (local/serverless_moto.py, served in this process by
local/supervisor/serverless.py) runs each attempt as the instance's real job,
launched from the run's own request (local/serverless_launch.py) and applies
the run's retry policy when an attempt's process exits; the supervisor's
``check`` (infra/supervisor/serverless.py) runs on a loop against the same
server, reading the job's local lease, exit record and stop marker through
an S3 facade and publishing its alarm to SNS (read back through SQS).

* a job whose attempts are SIGKILLed at random moments is retried by the
  service within its ``retryPolicy``, then restarted by the supervisor within
  what is left of the budget, then exactly one alarm names the last exit;
* a refused configuration (exit 2 on ``--platform serverless``) ends its run
  SUCCESS after one attempt, is not restarted, and alarms at once;
* a change of the job (the handler's Update with a new package) hands over
  through the stop marker and the lease: the new run starts only once the old
  job has exited and the lease is free, two jobs never run at once, and every
  record produced before, during and after is in the table exactly once; then
  ``make stop-job`` stops the new run, and the supervisor leaves it stopped.
"""

from __future__ import annotations

import io
import json
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest

from infra.serverless.job_run_handler import Clock, handle
from infra.supervisor import handler, serverless
from infra.supervisor.decision import Decision, SupervisorState
from local.emulators import Emulators
from local.harness import LocalInstance, replace_fields
from local.serverless_launch import is_serverless
from local.supervisor.serverless import LocalService, local_service, run_until, s3_uri
from model import contract
from model.exit_record import read_exit_record
from model.lease import lease_path
from scripts import stop
from tests.e2e.conftest import MakeLocal, assert_all_once, mix
from tests.infra.supervisor.policy_helpers import local_pace_policy

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

INSTANCE: Final = "orders-eu-west-1"
# A budget of 3 an hour splits into 2 service attempts and 1 supervisor restart
# (infra/serverless/job_run.py restart_budget_split).
BUDGET: Final = 3
SERVICE_ATTEMPTS: Final = 2
POLICY: Final = local_pace_policy(max_restarts=1, window_sec=3_600, backoff_max_sec=1)
CHECKS_AFTER: Final = 6


@dataclass
class Supervised:
    """The supervisor's ``check`` against the local service, one step at a time."""

    service: LocalService
    settings: Any
    clients: dict[str, Any]
    queue: str
    # (attempts ended by then, the decision), one per check.
    checks: list[tuple[int, Decision]] = field(default_factory=list)
    published: list[dict[str, Any]] = field(default_factory=list)

    def step(self) -> None:
        self.service.poll()
        decision = handler.check(self.clients, self.settings, time.time())
        self.checks.append((len(self.service.ended), decision))

    @property
    def decisions(self) -> list[Decision]:
        return [decision for _, decision in self.checks]

    @property
    def acted(self) -> list[Decision]:
        return [d for d in self.decisions if d.action != "none"]

    @property
    def state(self) -> SupervisorState:
        return self.decisions[-1].state if self.checks else SupervisorState()

    def alarms(self) -> list[dict[str, Any]]:
        """Every SNS message published to the alarm topic so far."""
        while True:
            got = self.clients["sqs"].receive_message(
                QueueUrl=self.queue, MaxNumberOfMessages=10, WaitTimeSeconds=0
            )
            messages = got.get("Messages", [])
            if not messages:
                return self.published
            for message in messages:
                self.published.append(json.loads(message["Body"]))
                self.clients["sqs"].delete_message(
                    QueueUrl=self.queue, ReceiptHandle=message["ReceiptHandle"]
                )

    def more_checks(self, count: int) -> None:
        target = len(self.checks) + count
        run_until(lambda: len(self.checks) >= target, f"{count} more checks", 60, self.step)


def serverless_instance(instances: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The e2e example's copy of the instance, on serverless with a budget of 3."""
    base = instances[INSTANCE]
    supervisor = base.supervisor.model_copy(update={"max_restarts_per_hour": BUDGET})
    copy = base.model_copy(update={"compute": "serverless", "supervisor": supervisor})
    monkeypatch.setitem(instances, INSTANCE, copy)
    return copy


def handover(local: LocalInstance) -> dict[str, str]:
    """The custom resource's ``Handover`` property, on the local checkpoint."""
    marker = local.config.stop_marker_path
    assert marker is not None
    return {
        "LeaseUri": s3_uri(lease_path(local.config.checkpoint_location)),
        "StopMarkerUri": s3_uri(marker),
        "StopTimeoutSec": "120",
        "CancelTimeoutSec": "60",
        "PollSec": "0.5",
    }


def event(kind: str, request: dict[str, Any], local: LocalInstance, **extra: Any) -> dict[str, Any]:
    properties = {"StartJobRun": request, "Handover": handover(local)}
    return {
        "RequestType": kind,
        "ResourceProperties": properties,
        "StackId": f"stack/{local.name}",
        "LogicalResourceId": "JobRun",
        "RequestId": f"{kind}-{len(extra)}",
        **extra,
    }


def clock(service: LocalService, also: Any = None) -> Clock:
    """The handler's clock: each of its waits lets the service end attempts."""

    def sleep(seconds: float) -> None:
        service.poll()
        if also is not None:
            also()
        time.sleep(min(seconds, 0.25))

    return Clock(sleep=sleep, deadline=time.time() + 840)


def deploy(service: LocalService) -> tuple[str, str, dict[str, Any]]:
    """The stack's Create: the custom resource starts the deployed run (its ID,
    the resource's physical ID, the request)."""
    local = service.local
    request = service.request(local.instance, local.config)
    assert request["retryPolicy"] == {"maxFailedAttemptsPerHour": SERVICE_ATTEMPTS}
    result = handle(event("Create", request, local), service.clients(), clock(service))
    return result.data["JobRunId"], result.physical_id, request


def supervise(service: LocalService, request: dict[str, Any]) -> Supervised:
    """The supervisor's settings as the construct sets them, an alarm topic
    with a queue on it."""
    local = service.local
    clients = service.clients()
    topic = clients["sns"].create_topic(Name=f"{local.name}-alarms")["TopicArn"]
    queue = clients["sqs"].create_queue(QueueName=f"{local.name}-inbox")["QueueUrl"]
    queue_arn = clients["sqs"].get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    clients["sns"].subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    marker = local.config.stop_marker_path
    assert marker is not None
    env = {
        handler.ENV_INSTANCE: local.name,
        handler.ENV_CHECKPOINT: s3_uri(local.config.checkpoint_location),
        handler.ENV_STATE: s3_uri(contract.supervisor_state_path(marker)),
        handler.ENV_POLICY: json.dumps(POLICY.__dict__),
        handler.ENV_TOPIC: topic,
        handler.ENV_STOP_MARKER: s3_uri(marker),
        serverless.ENV_APPLICATION_ID: service.application_id,
        serverless.ENV_REQUEST: json.dumps(request),
    }
    settings = handler.Settings.from_env(env, serverless.ServerlessRun)
    return Supervised(service, settings, clients, queue)


def stop_job_while_supervised(
    service: LocalService, request: dict[str, Any], tmp_path: Path
) -> None:
    """``make stop-job`` (the Makefile's target runs scripts.stop) on the
    running job while the supervisor checks: it exits 0 as stopped by the
    operator, and the supervisor neither restarts nor alarms."""
    local = service.local
    ended = len(service.ended)
    supervised = supervise(service, request)
    run_until(lambda: supervised.state.last_seen_running is not None, "seen", 300, supervised.step)
    out = io.StringIO()
    argv = ["--instance", INSTANCE, "--work-dir", str(tmp_path), "--timeout", "120"]
    codes: list[int] = []
    stopper = threading.Thread(
        target=lambda: codes.append(stop.main([*argv, "--poll-sec", "0.5"], out))
    )
    stopper.start()
    run_until(
        lambda: not stopper.is_alive() and len(service.ended) > ended,
        "stopped",
        180,
        supervised.step,
    )
    stopper.join()
    assert codes == [0], out.getvalue()
    supervised.more_checks(CHECKS_AFTER)
    record = read_exit_record(local.config.checkpoint_location)
    assert record is not None and record.stopped_by == contract.STOP_BY_OPERATOR
    assert supervised.acted == [], [d.message for d in supervised.acted]
    assert supervised.state.stopped_by_operator
    assert supervised.alarms() == []


def job_runs(service: LocalService) -> list[dict[str, Any]]:
    found = service.client("emr-serverless").list_job_runs(applicationId=service.application_id)
    return sorted(found["jobRuns"], key=lambda run: run["createdAt"])


@pytest.fixture
def setup(
    emulators: Emulators,
    make_local: MakeLocal,
    instances: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[LocalService]:
    serverless_instance(instances, monkeypatch)
    local = make_local(emulators, INSTANCE, shards=1)
    assert is_serverless(local.instance)
    with local_service(local) as service:
        yield service


def test_killed_attempts_are_retried_then_restarted_then_one_alarm(
    setup: LocalService, rng: random.Random
) -> None:
    service, local = setup, setup.local
    first, _physical, request = deploy(service)
    supervised = supervise(service, request)
    kills: list[tuple[str, int]] = []
    aim: dict[int, float] = {}  # launch number -> when to kill (monotonic)

    def step() -> None:
        supervised.step()
        job, launches = local.job, service.launches
        seen = supervised.state.last_seen_running
        if job is None or not job.running or seen is None or seen < launches[-1][2]:
            return  # the supervisor has not seen this attempt hold its lease yet
        at = aim.setdefault(len(launches), time.monotonic() + rng.uniform(0.0, 3.0))
        if time.monotonic() >= at:
            job.kill()  # SIGKILL of the attempt's whole process group
            kills.append(launches[-1][:2])

    run_until(lambda: any(d.action == "alarm" for d in supervised.decisions), "alarm", 600, step)
    supervised.more_checks(CHECKS_AFTER)

    second = job_runs(service)[-1]["id"]
    assert second != first
    assert service.ended == [
        (first, 1, -9, "RUNNING"),  # the service retries within maxFailedAttemptsPerHour 2
        (first, 2, -9, "FAILED"),  # its attempts are spent: the run fails
        (second, 1, -9, "RUNNING"),  # the supervisor's restart, retried by the service
        (second, 2, -9, "FAILED"),
    ]
    assert kills == [(first, 1), (first, 2), (second, 1), (second, 2)]
    assert [(d.action, d.reason) for d in supervised.acted] == [
        ("restart", contract.EXIT_VANISHED),
        ("alarm", contract.EXIT_VANISHED),
    ]
    alarm = supervised.acted[-1].message
    assert "restart budget spent: 1 restarts" in alarm and contract.EXIT_VANISHED in alarm
    published = supervised.alarms()
    assert len(published) == 1, published
    assert published[0]["Message"] == alarm
    assert local.name in published[0]["Subject"]
    # Left alone after the alarm: no new run, attempt or message.
    assert [run["state"] for run in job_runs(service)] == ["FAILED", "FAILED"]
    assert len(service.launches) == 4 and local.runs == 4
    assert all(others == 0 and not held for *_, others, held in service.launches)
    assert supervised.state.gave_up == "budget"


def test_a_refused_configuration_is_not_retried_and_alarms_at_once(setup: LocalService) -> None:
    service, local = setup, setup.local
    # The stream's retention raised beyond the de-duplication horizon outside
    # the stack: the job refuses to start (exit 2, job/driver.py).
    horizon = local.config.dedup_horizon_hours
    local.kinesis.increase_stream_retention_period(
        StreamName=local.config.stream_name, RetentionPeriodHours=horizon + 24
    )
    run_id, _physical, request = deploy(service)
    supervised = supervise(service, request)
    run_until(lambda: supervised.acted != [], "the supervisor acted", 300, supervised.step)
    supervised.more_checks(CHECKS_AFTER)

    # One attempt; the process ended with status 0, so the run is SUCCESS and
    # the retry policy never started it again.
    assert service.ended == [(run_id, 1, 0, "SUCCESS")]
    record = read_exit_record(local.config.checkpoint_location)
    assert record is not None and (record.code, record.reason) == (2, contract.EXIT_CONFIG_REFUSED)
    after_end = [decision for ended, decision in supervised.checks if ended >= 1]
    assert after_end[0].action == "alarm", "the first check after the run ended alarms"
    assert [d.action for d in supervised.acted] == ["alarm"]
    alarm = supervised.acted[0].message
    assert contract.EXIT_CONFIG_REFUSED in alarm and "a restart cannot cure it" in alarm
    assert f"dedup_horizon_hours is {horizon}" in alarm, alarm
    assert len(supervised.alarms()) == 1
    assert [run["state"] for run in job_runs(service)] == ["SUCCESS"]
    assert local.runs == 1


def test_a_change_of_the_job_hands_over_then_make_stop_job_is_left_alone(
    setup: LocalService, tmp_path: Path
) -> None:
    """A new version hands over with nothing lost or doubled; then
    ``make stop-job`` stops the new run while the supervisor checks, and the
    supervisor leaves it stopped (one case: both need a deployed run, and the
    handover leaves one running)."""
    service, local = setup, setup.local
    old, physical, old_request = deploy(service)
    local.produce(mix(150, seed=41, prefix="ho-before"))
    local.wait_until_accounted(timeout=300)

    # A new version of the job: its config changed, so its staged package
    # (and the request's entry point) is new.
    new_config = replace_fields(local.config, {"trigger_interval_sec": 2})
    new_request = service.request(local.instance, new_config)
    assert (
        new_request["jobDriver"]["sparkSubmit"]["entryPoint"]
        != old_request["jobDriver"]["sparkSubmit"]["entryPoint"]
    )

    # Two jobs must never run at once: watched all along the handover.
    live_max = [0]
    samples = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            live_max[0] = max(live_max[0], sum(job.running for job in local.all_jobs))
            samples[0] += 1
            done.wait(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    producer = threading.Thread(
        target=lambda: local.produce(mix(150, seed=42, prefix="ho-during"), rate=30.0)
    )
    producer.start()
    update = event(
        "Update",
        new_request,
        local,
        PhysicalResourceId=physical,
        OldResourceProperties={"StartJobRun": old_request, "Handover": handover(local)},
    )
    new = handle(update, service.clients(), clock(service)).data["JobRunId"]
    producer.join()
    handed = read_exit_record(local.config.checkpoint_location)
    local.produce(mix(150, seed=43, prefix="ho-after"))
    local.wait_until_accounted(timeout=300)
    done.set()
    watcher.join(timeout=10)

    assert new != old
    assert service.ended == [(old, 1, 0, "SUCCESS")]  # stopped gracefully, not cancelled
    assert handed is not None and handed.stopped_by == contract.STOP_BY_HANDOVER
    assert [launch[:2] for launch in service.launches] == [(old, 1), (new, 1)]
    # The new run started once the old job had exited and the lease was free.
    assert all(others == 0 and not held for *_, others, held in service.launches)
    assert samples[0] >= 20 and live_max[0] == 1
    assert local.config.trigger_interval_sec == 2  # the new version runs
    assert_all_once(local, 450)
    assert [run["state"] for run in job_runs(service)] == ["SUCCESS", "RUNNING"]

    # make stop-job on the new run, while the supervisor keeps checking.
    stop_job_while_supervised(service, new_request, tmp_path)
    assert service.ended == [(old, 1, 0, "SUCCESS"), (new, 1, 0, "SUCCESS")]
    assert [run["state"] for run in job_runs(service)] == ["SUCCESS", "SUCCESS"]
    assert local.runs == 2
