"""The supervisor's Lambda: observe the instance, :func:`decide`, act. Runs every
minute (an EventBridge schedule, ``infra/supervisor/construct.py``).

Observations, all of which survive the cluster:

* the lease ``<checkpoint>/_lease`` in S3: held and fresh (``expires_at`` in
  the future) means the job runs, wherever (:func:`model.lease.s3_lease_state`);
* the exit record ``<checkpoint>/_exit`` (:mod:`model.exit_record`);
* the stop marker (``stop_marker_path``): an operator's (any first word but
  ``handover``, :meth:`model.graceful_stop.StopMarker.requester`) keeps the job
  stopped even when it died before writing its exit record;
* on EMR, the cluster's state (``DescribeCluster``; steps can be added only in
  STARTING, BOOTSTRAPPING, RUNNING or WAITING,
  https://docs.aws.amazon.com/emr/latest/APIReference/API_AddJobFlowSteps.html;
  the states: https://docs.aws.amazon.com/emr/latest/APIReference/API_ClusterStatus.html)
  and whether the job's step is still PENDING or RUNNING (``ListSteps``,
  https://docs.aws.amazon.com/emr/latest/APIReference/API_ListSteps.html): a
  start under way;
* the version the job runs, from its lease (``version``,
  :mod:`model.job_version`), and the one the stack's step runs, from the
  ``--config`` of ``STEP``; only when the two differ, the stack's status:
  ``DescribeStacks`` of its own stack (``STACK_ARN``, the stack's ID), the one
  call this needs (https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_DescribeStacks.html).

Whether a key exists is asked with ``ListObjectsV2`` and ``Prefix`` equal to
the key (:func:`infra.s3_keys.read_if_present`), never inferred from GetObject's 404-vs-403:
that call needs ``s3:ListBucket`` on the bucket
(https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListObjectsV2.html), and
its ``prefix`` request parameter is what the ``s3:prefix`` condition key
matches (Service Authorization Reference, "Actions, resources, and condition
keys for Amazon S3", ListBucket:
https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html;
the user guide's example "limit listing to a prefix":
https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html),
so the construct grants it with ``s3:prefix`` equal to each key. The listing
returns keys in ascending order, so the key itself, when present, is the
first one with that prefix: ``MaxKeys=1`` suffices.

The heartbeat metric is not read: the lease says the same (a live job renews
it every ``lease_ttl_sec / 3``), and ``GetMetricData`` has no resource-level
permissions, so reading it would widen the role for no new fact.

Actions: ``restart`` asks the instance's restart target (a :class:`Target`):
on EMR (:class:`EmrStep`) it adds the stack's own step
(``infra.emr_step.build_step``, rendered at synth into ``STEP``) with
``AddJobFlowSteps``, whose launcher hands over from whatever still holds the
lease, like a deploy; on EMR Serverless
(:class:`infra.supervisor.serverless.ServerlessRun`) it is ``StartJobRun`` of
the stack's own request. The target also says whether the platform can run
the job and whether a start is under way; the rest (lease, exit record, stop
marker, state, alarm, metrics) is this module's, for both. ``handback`` is
the same start as ``restart``: after a rolled-back deploy the stack's own step
hands over from the version that runs on. ``alarm`` publishes
the reason to the instance's alarm topic. Every check writes the state to
``control/<instance>/supervisor.json`` and puts ``SupervisorRestarts`` and
``SupervisorGaveUp`` in the instance's namespace.

Configuration comes from environment variables set by the construct (their
names below); the code carries only stdlib, boto3 (in the Lambda runtime) and
the few import-light modules :func:`artifacts.packaging.stage_supervisor` stages.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Final, Protocol

import boto3
from botocore.config import Config

from infra.s3_keys import read_if_present
from infra.supervisor.decision import (
    ClusterState,
    Decision,
    Observation,
    Policy,
    SupervisorState,
    decide,
)
from infra.supervisor.metrics import metric_data
from model import contract
from model.exit_record import ExitRecord, ExitRecordError
from model.job_version import version_in
from model.lease import lease_path, s3_lease_state
from model.storage_uri import parse_s3_uri

log = logging.getLogger()
log.setLevel(logging.INFO)

# Environment variables (infra/supervisor/construct.py sets them).
ENV_INSTANCE: Final = "INSTANCE"
ENV_CLUSTER_ID: Final = "CLUSTER_ID"
ENV_CHECKPOINT: Final = "CHECKPOINT_URI"
ENV_STATE: Final = "STATE_URI"
ENV_STEP: Final = "STEP"
ENV_POLICY: Final = "POLICY"
ENV_TOPIC: Final = "ALARM_TOPIC_ARN"
ENV_STOP_MARKER: Final = "STOP_MARKER_URI"
ENV_STACK_ARN: Final = "STACK_ARN"

CLUSTER_READY: Final = frozenset({"RUNNING", "WAITING"})
CLUSTER_STARTING: Final = frozenset({"STARTING", "BOOTSTRAPPING"})
STEP_UNDER_WAY: Final = ("PENDING", "RUNNING")
# SNS subjects are at most 100 characters
# (https://docs.aws.amazon.com/sns/latest/api/API_Publish.html).
MAX_SUBJECT: Final = 100


def env_object(
    env: Mapping[str, str], name: str, valid: Callable[[dict[str, Any]], bool], what: str
) -> dict[str, Any]:
    """The JSON object in variable ``name``; a clear error unless ``valid``."""
    value = json.loads(env[name])
    if not isinstance(value, dict) or not valid(value):
        raise ValueError(f"environment: {name} is not {what}")
    return value


class Target(Protocol):
    """Where the job runs and how it is started again: the platform part of
    a check. ``CLIENT`` names the boto3 client it is given; ``REQUIRED`` the
    environment variables :meth:`from_env` reads."""

    CLIENT: ClassVar[str]
    REQUIRED: ClassVar[tuple[str, ...]]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Target: ...

    @property
    def version(self) -> str | None:
        """The job version the stack's own start runs (model.job_version);
        None: not known, so never handed back to."""
        ...

    @property
    def stack_arn(self) -> str:
        """The stack whose status gates a hand-back; empty: none."""
        ...

    def state(self, client: Any) -> tuple[ClusterState, str, bool]:
        """(whether the platform can run the job, a detail, a start under way)."""
        ...

    def restart(self, client: Any) -> str:
        """Start the job again; what was started, for the log."""
        ...


@dataclass(frozen=True)
class EmrStep:
    """The EMR target: the stack's own step on the instance's cluster."""

    cluster_id: str
    step: dict[str, Any]
    stack_arn: str
    CLIENT: ClassVar[str] = "emr"
    REQUIRED: ClassVar[tuple[str, ...]] = (ENV_CLUSTER_ID, ENV_STEP, ENV_STACK_ARN)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> EmrStep:
        step = env_object(
            env, ENV_STEP, lambda s: "HadoopJarStep" in s, "an EMR step (no HadoopJarStep)"
        )
        return cls(cluster_id=env[ENV_CLUSTER_ID], step=step, stack_arn=env[ENV_STACK_ARN])

    @property
    def version(self) -> str | None:
        """The version named by the step's ``--config`` (the job's arguments)."""
        args = self.step["HadoopJarStep"].get("Args", ())
        return version_in([str(arg) for arg in args])

    def state(self, client: Any) -> tuple[ClusterState, str, bool]:
        """(state, detail, a start under way) from the EMR API."""
        status = client.describe_cluster(ClusterId=self.cluster_id)["Cluster"]["Status"]
        state = str(status["State"])
        if state in CLUSTER_STARTING:
            return "starting", state, False
        if state not in CLUSTER_READY:
            reason = status.get("StateChangeReason", {}).get("Message", "")
            return "gone", f"{self.cluster_id} {state} {reason}".strip(), False
        steps = client.list_steps(ClusterId=self.cluster_id, StepStates=list(STEP_UNDER_WAY))
        name = self.step.get("Name")
        pending = any(step.get("Name") == name for step in steps.get("Steps", ()))
        return "ready", state, pending

    def restart(self, client: Any) -> str:
        reply = client.add_job_flow_steps(JobFlowId=self.cluster_id, Steps=[self.step])
        return f"step {reply['StepIds']}"


@dataclass(frozen=True)
class Settings:
    instance: str
    checkpoint_uri: str
    state_uri: str
    policy: Policy
    topic_arn: str
    stop_marker_uri: str
    target: Target

    @classmethod
    def from_env(cls, env: Mapping[str, str], target: type[Target] = EmrStep) -> Settings:
        required = (ENV_INSTANCE, *target.REQUIRED, ENV_CHECKPOINT, ENV_STATE, ENV_STOP_MARKER)
        missing = [name for name in required if not env.get(name)]
        if missing:
            raise ValueError(f"environment: {missing[0]} is not set; the construct sets it")
        return cls(
            instance=env[ENV_INSTANCE],
            checkpoint_uri=env[ENV_CHECKPOINT],
            state_uri=env[ENV_STATE],
            policy=Policy(**json.loads(env.get(ENV_POLICY) or "{}")),
            topic_arn=env.get(ENV_TOPIC, ""),
            stop_marker_uri=env[ENV_STOP_MARKER],
            target=target.from_env(env),
        )


def operator_stop_requested(body: bytes | None) -> bool:
    """An operator's stop marker: present, and not a handover's (whose first
    word is ``handover``; model.graceful_stop.StopMarker.requester)."""
    if body is None:
        return False
    words = body.decode("utf-8", errors="replace").split()
    return words[:1] != [contract.STOP_BY_HANDOVER]


def stack_status(cloudformation: Any, stack_arn: str) -> str:
    """The stack's status, by its ID (a stack's ID names it for good: its name
    may be reused by another stack once it is deleted)."""
    [stack] = cloudformation.describe_stacks(StackName=stack_arn)["Stacks"]
    return str(stack["StackStatus"])


def observe(
    s3: Any, platform: Any, settings: Settings, now: float, cloudformation: Any = None
) -> Observation:
    """What :func:`decide` needs; ``platform`` is the target's client,
    ``cloudformation`` is asked only when the job runs another version than
    the stack's step."""
    lease = lease_path(settings.checkpoint_uri)
    body = read_if_present(s3, lease)
    record = None
    exit_path = contract.exit_record_path(settings.checkpoint_uri)
    exit_body = read_if_present(s3, exit_path)
    if exit_body is not None:
        try:
            record = ExitRecord.from_json(exit_body, exit_path)
        except ExitRecordError as exc:  # a record we cannot read explains nothing
            log.warning("%s", exc)
    cluster, detail, pending = settings.target.state(platform)
    job = s3_lease_state(lease, body, now)
    observation = Observation(
        now=now,
        running=job.running,
        exit=record,
        start_pending=pending,
        cluster=cluster,
        cluster_detail=detail,
        stop_requested=operator_stop_requested(read_if_present(s3, settings.stop_marker_uri)),
        job_version=job.version if job.running else None,
        stack_version=settings.target.version,
    )
    if observation.version_differs and settings.target.stack_arn and cloudformation is not None:
        status = stack_status(cloudformation, settings.target.stack_arn)
        observation = replace(observation, stack_status=status)
    return observation


def load_state(s3: Any, settings: Settings) -> SupervisorState:
    body = read_if_present(s3, settings.state_uri)
    if body is None:
        return SupervisorState()
    return SupervisorState.from_json(body, settings.state_uri)


def act(decision: Decision, clients: Mapping[str, Any], settings: Settings, now: float) -> None:
    """Carry the decision out, then save the state and publish the metrics."""
    if decision.action in ("restart", "handback"):
        started = settings.target.restart(clients[settings.target.CLIENT])
        verb = "restarted" if decision.action == "restart" else "handed back"
        log.warning("%s %s: %s; %s", verb, settings.instance, started, decision.message)
    elif decision.action == "alarm":
        log.error("supervisor of %s gives up: %s", settings.instance, decision.message)
        if settings.topic_arn:
            subject = f"{settings.instance} supervisor: {decision.reason}"[:MAX_SUBJECT]
            clients["sns"].publish(
                TopicArn=settings.topic_arn, Subject=subject, Message=decision.message
            )
    else:
        log.info("%s: %s", settings.instance, decision.message)
    bucket, key = parse_s3_uri(settings.state_uri)
    clients["s3"].put_object(Bucket=bucket, Key=key, Body=decision.state.to_json().encode())
    clients["cloudwatch"].put_metric_data(
        Namespace=contract.metric_namespace(settings.instance),
        MetricData=metric_data(settings.instance, decision.state, now),
    )


def check(clients: Mapping[str, Any], settings: Settings, now: float) -> Decision:
    """One check: observe, decide, act."""
    observation = observe(
        clients["s3"], clients[settings.target.CLIENT], settings, now, clients.get("cloudformation")
    )
    decision = decide(observation, load_state(clients["s3"], settings), settings.policy)
    act(decision, clients, settings, now)
    return decision


def _clients(target: type[Target]) -> dict[str, Any]:
    # Bounded: a check must finish well inside the function's timeout.
    config = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 3})
    # Creating a client calls nothing: cloudformation is asked only on a mismatch.
    names = ("s3", "sns", "cloudwatch", "cloudformation", target.CLIENT)
    return {name: boto3.client(name, config=config) for name in names}


def run(target: type[Target]) -> dict[str, str]:
    """One check of the instance whose job runs on ``target``."""
    decision = check(_clients(target), Settings.from_env(os.environ, target), time.time())
    return {"action": decision.action, "reason": decision.reason, "message": decision.message}


def handler(_event: object, _context: object) -> dict[str, str]:
    """The EMR supervisor's entry point (infra/supervisor/serverless.py has the other)."""
    return run(EmrStep)
