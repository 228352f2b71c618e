"""An instance's life on EMR Serverless after its first create, end to end:
the real job-run resource and application guard (infra/serverless/job_run_handler.py),
driven through CloudFormation's request sequences, against the patched
emulator (local/serverless_moto.py, which refuses UpdateApplication and
DeleteApplication unless the application is CREATED or STOPPED) running the
instance's real job for every attempt of every run.

:class:`Cfn` plays CloudFormation as tests/infra/serverless/test_job_run_lifecycle.py
does with a fake job: the guard before the application, the application before
the job run on an update; an update that fails later rolls the job run back
with an ``Update`` carrying the old properties; a delete goes in reverse order
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requesttypes-update.html,
https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-updating-stacks.html,
https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requesttypes-delete.html).

One life, records produced all along: a new job version that fails later in
the stack and is rolled back, with the job SIGKILLed at a random moment of the
update's handover and again of the rollback's (after the recovery); then a
change of the application's shape while the job runs; then the stack's
delete. Every record is in the table exactly once, exactly one run is active
after each step, and the delete leaves no run and the application deleted.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import pytest
from moto.emrserverless.models import emrserverless_backends

from infra.serverless.job_run_handler import CONFIG_TAG, GUARD_TYPE, JOB_RUN_TYPE, Clock, handle
from local import serverless_moto
from local.harness import replace_fields
from local.supervisor.serverless import ACCOUNT, LocalService, run_until, s3_uri
from tests.e2e.conftest import assert_all_once, mix
from tests.e2e.test_serverless_self_healing import handover, job_runs, setup  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

SHAPE_A: Final = "shape-a"
SHAPE_B: Final = "shape-b"
# How long after a handover starts its kill may fall: the graceful stop and
# the next run's start both lie in it.
KILL_WINDOW_SEC: Final = 8.0


class Cfn:
    """CloudFormation's side of the instance's job: the guard, the application
    and the job run, with the physical IDs it holds."""

    def __init__(self, service: LocalService) -> None:
        self.service = service
        self.emr = service.client("emr-serverless")
        self.physical: dict[str, str] = {}
        self.requests = 0
        self.on_wait: Callable[[], None] = lambda: None
        pending = service.local.root / "pending-run.json"
        self.handover = {**handover(service.local), "PendingRunUri": s3_uri(pending)}

    def clock(self) -> Clock:
        def sleep(seconds: float) -> None:
            self.service.poll()
            self.on_wait()
            time.sleep(min(seconds, 0.25))

        return Clock(sleep=sleep, deadline=time.time() + 840)

    def guard(self, config: str) -> dict[str, Any]:
        name = self.service.local.name
        return {"ApplicationName": name, "ConfigHash": config, "Handover": self.handover}

    def job(self, request: dict[str, Any], config: str) -> dict[str, Any]:
        return {"StartJobRun": request, "Handover": self.handover, "ConfigHash": config}

    def send(
        self, kind: str, resource: str, props: dict[str, Any], old: dict[str, Any] | None = None
    ) -> str:
        self.requests += 1
        logical = "Guard" if resource == GUARD_TYPE else "JobRun"
        event: dict[str, Any] = {
            "RequestType": kind,
            "ResourceType": resource,
            "StackId": f"stack/{self.service.local.name}",
            "LogicalResourceId": logical,
            "RequestId": f"request-{self.requests}",
            "ResourceProperties": props,
        }
        if logical in self.physical:
            event["PhysicalResourceId"] = self.physical[logical]
        if old is not None:
            event["OldResourceProperties"] = old
        result = handle(event, self.service.clients(), self.clock())
        if kind == "Update":
            assert result.physical_id == self.physical[logical], "an Update replaced it"
        self.physical[logical] = result.physical_id
        return result.data.get("JobRunId", "")

    def tag_application(self, config: str) -> None:
        """The application's configuration tag, as its template sets it (moto
        serves EMR Serverless without TagResource)."""
        backend = emrserverless_backends[ACCOUNT][self.service.region]
        backend.applications[self.service.application_id].tags[CONFIG_TAG] = config

    def application_state(self) -> str:
        found = self.emr.get_application(applicationId=self.service.application_id)
        return str(found["application"]["state"])


def active(service: LocalService) -> list[str]:
    service.poll()
    return [
        run["name"]
        for run in job_runs(service)
        if run["state"] in serverless_moto.ACTIVE_RUN_STATES
    ]


def kill_at_a_random_moment(cfn: Cfn, rng: random.Random, kills: list[float]) -> Callable[[], None]:
    """A hook for the handover's waits, and for the wait after it: SIGKILL the
    job then running, once, at a moment drawn in the handover's window."""
    start = time.monotonic()
    at = start + rng.uniform(0.5, KILL_WINDOW_SEC)
    local = cfn.service.local

    def maybe_kill() -> None:
        job = local.job
        due = (not kills or kills[-1] < start) and time.monotonic() >= at
        if due and job is not None and job.running:
            job.kill()  # SIGKILL of the attempt's whole process group
            kills.append(time.monotonic())

    return maybe_kill


def settle(
    cfn: Cfn,
    local: Any,
    request_name: str,
    hook: Callable[[], None],
    *,
    kills: list[float],
    due: int,
) -> None:
    """After a handover: its kill (the ``due``-th) falls if it has not yet
    (its moment may lie past the handover's end); then one run of
    ``request_name`` is active and every record produced so far is in."""

    def step() -> None:
        cfn.service.poll()
        hook()

    run_until(lambda: len(kills) >= due, "the handover's kill", 60, step)
    run_until(
        lambda: active(cfn.service) == [request_name], f"one run of {request_name}", 300, step
    )
    local.wait_until_accounted(timeout=300)


def test_an_instance_lives_through_rollbacks_kills_a_shape_change_and_its_delete(
    setup: LocalService,  # noqa: F811
    rng: random.Random,
) -> None:
    service, local = setup, setup.local
    cfn = Cfn(service)
    cfn.tag_application(SHAPE_A)
    # The stack names each request by its digest (infra/serverless/app.py).
    v1 = {**service.request(local.instance, local.config), "name": f"{local.name}-v1"}
    v2_config = replace_fields(local.config, {"trigger_interval_sec": 2})
    v2 = {**service.request(local.instance, v2_config), "name": f"{local.name}-v2"}

    # Create: the guard (nothing to do yet), the application, the job run.
    cfn.send("Create", GUARD_TYPE, cfn.guard(SHAPE_A))
    cfn.send("Create", JOB_RUN_TYPE, cfn.job(v1, SHAPE_A))
    local.produce(mix(120, seed=71, prefix="life-a"))
    local.wait_until_accounted(timeout=300)
    assert active(service) == [v1["name"]]

    # A new version that fails later in the stack: its update, then the
    # rollback's Update with the old properties; a kill in each handover.
    kills: list[float] = []
    producer = threading.Thread(
        target=lambda: local.produce(mix(200, seed=72, prefix="life-b"), rate=20.0)
    )
    producer.start()
    for due, (new, old) in enumerate(((v2, v1), (v1, v2)), start=1):
        cfn.on_wait = kill_at_a_random_moment(cfn, rng, kills)
        cfn.send("Update", JOB_RUN_TYPE, cfn.job(new, SHAPE_A), cfn.job(old, SHAPE_A))
        settle(cfn, local, new["name"], cfn.on_wait, kills=kills, due=due)
    producer.join()
    cfn.on_wait = lambda: None
    local.wait_until_accounted(timeout=300)
    assert len(kills) == 2, "a kill fell in each handover"
    assert active(service) == [v1["name"]], "the rollback ends on the old request"

    # A shape change while the job runs: the guard stops job and application,
    # CloudFormation updates the application (refused unless STOPPED), the job
    # run starts it again.
    cfn.send("Update", GUARD_TYPE, cfn.guard(SHAPE_B), cfn.guard(SHAPE_A))
    assert active(service) == [] and cfn.application_state() == "STOPPED"
    cfn.emr.update_application(
        applicationId=service.application_id,
        maximumCapacity={"cpu": "4 vCPU", "memory": "8 GB"},
    )
    cfn.tag_application(SHAPE_B)
    cfn.send("Update", JOB_RUN_TYPE, cfn.job(v1, SHAPE_B), cfn.job(v1, SHAPE_A))
    local.produce(mix(120, seed=73, prefix="life-c"))
    local.wait_until_accounted(timeout=300)
    assert active(service) == [v1["name"]]

    # The stack's delete: the job run, then the application, then the guard.
    cfn.send("Delete", JOB_RUN_TYPE, cfn.job(v1, SHAPE_B))
    assert active(service) == []
    cfn.emr.delete_application(applicationId=service.application_id)
    cfn.send("Delete", GUARD_TYPE, cfn.guard(SHAPE_B))
    applications = cfn.emr.list_applications()["applications"]
    assert [app["state"] for app in applications] in ([], ["TERMINATED"])

    assert_all_once(local, 440)
