"""CloudFormation's request sequences, replayed against the real handler code
(infra/serverless/job_run_handler.py: ``handle`` with a fake clock) and the
patched EMR Serverless (local/serverless_moto.py), with the fake job of
tests/infra/serverless/fakes.py.

:class:`Stack` plays CloudFormation for the three resources of a serverless
instance's job, in the order their dependencies give: the guard
(``Custom::ServerlessApplicationGuard``) before the application (which
``DependsOn`` it), the application before the job run (which references it).
The rules it follows, from CloudFormation's User Guide:

* an update updates a resource only when its properties changed, in
  dependency order; a custom resource gets ``Update`` with the old and the new
  properties, and a returned physical ID that differs means a replacement,
  deleted at cleanup
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requesttypes-update.html);
* an update that fails rolls the updated resources back in reverse order, a
  custom resource by an ``Update`` with the old properties
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-updating-stacks.html);
* a delete goes in reverse dependency order, a failed create is followed by
  the delete of what was created, each custom resource with the physical ID
  it answered
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-requesttypes-delete.html).

The application's update is ``UpdateApplication`` (refused unless CREATED or
STOPPED,
https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_UpdateApplication.html)
plus its tag; its delete is ``DeleteApplication`` (the same rule,
https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_DeleteApplication.html).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core.models import DEFAULT_ACCOUNT_ID
from moto.emrserverless.models import emrserverless_backends

from infra.serverless.job_run_handler import (
    CONFIG_TAG,
    GUARD_TYPE,
    JOB_RUN_TYPE,
    handle,
    physical_id,
)
from local import serverless_moto as sm
from tests.infra.serverless.fakes import BUCKET, REGION, FakeJob, event, handover, request

APP_NAME = "streaming-orders-eu-west-1"


@dataclass(frozen=True)
class Template:
    """What an instance's template says about its job."""

    version: str = "v1"  # the request's name: the job package
    config: str = "shape-a"  # the application's configuration hash
    capacity: str = "2 vCPU"
    stop_timeout: str = "420"


class StackFailedError(Exception):
    pass


class Stack:
    """CloudFormation's side of one instance's job (the module's docstring)."""

    def __init__(self, aws: dict[str, Any]) -> None:
        self.aws = aws
        self.emr = aws["emr-serverless"]
        self.app_id = ""
        self.job: FakeJob | None = None
        self.physical: dict[str, str] = {}
        self.deployed: Template | None = None
        self.requests = 0

    # The resources' properties, as the construct renders them.
    def guard_props(self, t: Template) -> dict[str, Any]:
        return {
            "ApplicationName": APP_NAME,
            "ConfigHash": t.config,
            "Handover": handover(t.stop_timeout),
        }

    def job_props(self, t: Template) -> dict[str, Any]:
        return {
            "StartJobRun": request(self.app_id, f"streaming-orders-{t.version}"),
            "Handover": handover(t.stop_timeout),
            "ConfigHash": t.config,
        }

    def _send(self, kind: str, resource: str, props: dict[str, Any], **kw: Any) -> None:
        self.requests += 1
        logical = "Guard" if resource == GUARD_TYPE else "JobRun"
        assert self.job is not None
        result = handle(
            event(
                kind,
                props,
                self.physical.get(logical),
                resource_type=resource,
                logical_id=logical,
                request_id=f"r-{self.requests}",
                **kw,
            ),
            self.aws,
            self.job.clock(),
        )
        if logical in self.physical and kind == "Update":
            assert result.physical_id == self.physical[logical], "an Update replaced it"
        self.physical[logical] = result.physical_id
        self.job.start_running()

    def _app_tag(self, config: str) -> None:
        backend = emrserverless_backends[DEFAULT_ACCOUNT_ID][REGION]
        backend.applications[self.app_id].tags[CONFIG_TAG] = config

    def create(self, t: Template, *, fail_at_job_run: bool = False) -> None:
        self.job = FakeJob(self.aws["s3"], "")
        self._send("Create", GUARD_TYPE, self.guard_props(t))
        self.app_id = self.emr.create_application(
            name=APP_NAME,
            releaseLabel="emr-spark-8.1.0",
            type="SPARK",
            maximumCapacity={"cpu": t.capacity, "memory": "5 GB"},
            tags={CONFIG_TAG: t.config},
        )["applicationId"]
        self.job.application_id = self.app_id
        props = self.job_props(t)
        if fail_at_job_run:  # StartJobRun refused: a role of another account
            props["StartJobRun"]["executionRoleArn"] = "arn:aws:iam::999999999999:role/x"
        try:
            self._send("Create", JOB_RUN_TYPE, props)
        except Exception as failed:
            self.physical.setdefault("JobRun", _failed_physical(props))
            self.delete(t)
            raise StackFailedError("create failed and rolled back") from failed
        self.deployed = t

    def update(self, new: Template, *, fail_after: bool = False) -> None:
        """Update to ``new``; ``fail_after``: a resource later in the stack fails,
        so the update rolls back."""
        old = self.deployed
        assert old is not None
        done: list[str] = []
        if self.guard_props(new) != self.guard_props(old):
            self._send("Update", GUARD_TYPE, self.guard_props(new), old=self.guard_props(old))
            done.append("guard")
        if (new.config, new.capacity) != (old.config, old.capacity):
            self._update_application(new)
            done.append("application")
        if self.job_props(new) != self.job_props(old):
            self._send("Update", JOB_RUN_TYPE, self.job_props(new), old=self.job_props(old))
            done.append("job")
        if not fail_after:
            self.deployed = new
            return
        for resource in reversed(done):  # the rollback, with the old properties
            if resource == "job":
                self._send("Update", JOB_RUN_TYPE, self.job_props(old), old=self.job_props(new))
            elif resource == "application":
                self._update_application(old)
            else:
                self._send("Update", GUARD_TYPE, self.guard_props(old), old=self.guard_props(new))

    def _update_application(self, t: Template) -> None:
        self.emr.update_application(
            applicationId=self.app_id, maximumCapacity={"cpu": t.capacity, "memory": "5 GB"}
        )
        self._app_tag(t.config)

    def delete(self, t: Template) -> None:
        if "JobRun" in self.physical:
            self._send("Delete", JOB_RUN_TYPE, self.job_props(t))
        if self.app_id:
            self.emr.delete_application(applicationId=self.app_id)
        self._send("Delete", GUARD_TYPE, self.guard_props(t))

    # What the tests assert.
    def active(self) -> list[str]:
        """The names of the runs that are not ended."""
        assert self.job is not None
        return [run.name for run in self.job.runs() if run.state in sm.ACTIVE_RUN_STATES]

    def application_state(self) -> str:
        return str(self.emr.get_application(applicationId=self.app_id)["application"]["state"])


def _failed_physical(props: dict[str, Any]) -> str:
    return physical_id(event("Create", props, logical_id="JobRun"))


@pytest.fixture
def stack() -> Iterator[Stack]:
    with mock_aws(), sm.patched():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        emr = boto3.client("emr-serverless", region_name=REGION)
        yield Stack({"s3": s3, "emr-serverless": emr})


V1 = Template()


def test_create_starts_one_run_and_the_application(stack: Stack) -> None:
    stack.create(V1)
    assert stack.active() == ["streaming-orders-v1"]
    assert stack.application_state() == "STARTED"


def test_an_update_of_the_request_hands_over_to_one_run_of_the_new_request(
    stack: Stack,
) -> None:
    stack.create(V1)
    stack.update(replace(V1, version="v2"))
    assert stack.active() == ["streaming-orders-v2"]


def test_a_handover_only_update_leaves_the_job_running(stack: Stack) -> None:
    """Only ``Handover`` changed: the same run goes on, nothing is stopped."""
    stack.create(V1)
    assert stack.job is not None
    [before] = [run.id for run in stack.job.running()]
    stack.update(replace(V1, stop_timeout="600"))
    assert [run.id for run in stack.job.running()] == [before]
    assert not stack.job.marker()


def test_an_application_change_while_the_job_runs_is_handed_over_by_the_stack(
    stack: Stack,
) -> None:
    """UpdateApplication needs CREATED or STOPPED: the guard stops the job and
    the application first, the job-run resource starts it again after."""
    stack.create(V1)
    stack.update(replace(V1, config="shape-b", capacity="4 vCPU"))
    assert stack.active() == ["streaming-orders-v1"]
    assert stack.application_state() == "STARTED"
    assert stack.job is not None
    assert not stack.job.marker()


def test_the_rollback_of_a_request_update_leaves_one_run_of_the_old_request(
    stack: Stack,
) -> None:
    stack.create(V1)
    stack.update(replace(V1, version="v2"), fail_after=True)
    assert stack.active() == ["streaming-orders-v1"]


def test_the_rollback_of_an_application_change_leaves_one_run_of_the_old_request(
    stack: Stack,
) -> None:
    """The rollback reaches the job run while the application still has the new
    configuration: the run waits (pending) until the guard's rollback, after
    the application's, starts it on the restored application."""
    stack.create(V1)
    stack.update(replace(V1, version="v2", config="shape-b", capacity="4 vCPU"), fail_after=True)
    assert stack.active() == ["streaming-orders-v1"]
    assert stack.application_state() == "STARTED"


def test_the_rollback_of_an_application_change_that_itself_failed(stack: Stack) -> None:
    """The application's update fails (after the guard stopped the job): the
    guard's rollback starts the saved request again."""
    stack.create(V1)
    new = replace(V1, config="shape-b", capacity="4 vCPU")
    stack._send("Update", GUARD_TYPE, stack.guard_props(new), old=stack.guard_props(V1))
    assert stack.active() == []
    assert stack.application_state() == "STOPPED"
    # UpdateApplication failed: the application keeps its tag; the rollback.
    stack._send("Update", GUARD_TYPE, stack.guard_props(V1), old=stack.guard_props(new))
    assert stack.active() == ["streaming-orders-v1"]


def test_an_operator_stop_then_an_application_change_starts_the_new_run(stack: Stack) -> None:
    stack.create(V1)
    assert stack.job is not None
    for run in stack.job.running():
        sm.end_attempt(run, 0)
    stack.update(replace(V1, config="shape-b", capacity="4 vCPU"))
    assert stack.active() == ["streaming-orders-v1"]


def test_delete_leaves_no_run_and_the_application_deleted(stack: Stack) -> None:
    """The job-run resource's delete stops the run, then the application
    (StopApplication, wait for STOPPED), so DeleteApplication succeeds."""
    stack.create(V1)
    stack.update(replace(V1, version="v2"))
    stack.delete(replace(V1, version="v2"))
    assert stack.active() == []
    assert stack.application_state() == "TERMINATED"


def test_delete_after_a_failed_create_leaves_nothing(stack: Stack) -> None:
    with pytest.raises(StackFailedError):
        stack.create(V1, fail_at_job_run=True)
    assert stack.active() == []
    assert stack.application_state() == "TERMINATED"


def test_a_lambda_retry_of_the_create_starts_no_second_run(stack: Stack) -> None:
    """API StartJobRun's clientToken carries CloudFormation's RequestId: the
    same request again returns the same run."""
    stack.create(V1)
    assert stack.job is not None
    props = stack.job_props(V1)
    again = event("Create", props, logical_id="JobRun", request_id="r-2")
    handle(again, stack.aws, stack.job.clock())
    handle(again, stack.aws, stack.job.clock())
    assert stack.active() == ["streaming-orders-v1"]
