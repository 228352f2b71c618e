"""The supervisor's Lambda: observe the instance, :func:`decide`, act. Runs every
minute (an EventBridge schedule, ``infra/constructs/supervisor.py``).

Observations, all of which survive the cluster:

* the lease ``<checkpoint>/_lease`` in S3: held and fresh (``expires_at`` in
  the future) means the job runs, wherever (:func:`app.lease.s3_lease_state`);
* the exit record ``<checkpoint>/_exit`` (:mod:`app.exit_record`);
* the cluster's state (``DescribeCluster``; steps can be added only in
  STARTING, BOOTSTRAPPING, RUNNING or WAITING,
  https://docs.aws.amazon.com/emr/latest/APIReference/API_AddJobFlowSteps.html;
  the states: https://docs.aws.amazon.com/emr/latest/APIReference/API_ClusterStatus.html)
  and whether the job's step is still PENDING or RUNNING (``ListSteps``,
  https://docs.aws.amazon.com/emr/latest/APIReference/API_ListSteps.html): a
  start under way.

The heartbeat metric is not read: the lease says the same (a live job renews
it every ``lease_ttl_sec / 3``), and ``GetMetricData`` has no resource-level
permissions, so reading it would widen the role for no new fact.

Actions: ``restart`` adds the stack's own step (``infra.emr_step.build_step``,
rendered at synth into ``STEP``) with ``AddJobFlowSteps``; its launcher hands
over from whatever still holds the lease, like a deploy. ``alarm`` publishes
the reason to the instance's alarm topic. Every check writes the state to
``control/<instance>/supervisor.json`` and puts ``SupervisorRestarts`` and
``SupervisorGaveUp`` in the instance's namespace.

Configuration comes from environment variables set by the construct (their
names below); the code carries only stdlib, boto3 (in the Lambda runtime) and
the few import-light modules :func:`infra.packaging.stage_supervisor` stages.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from app import contract
from app.exit_record import ExitRecordError, read_exit_record
from app.lease import lease_path, s3_lease_state
from app.storage_uri import parse_s3_uri
from infra.supervisor.decision import (
    ClusterState,
    Decision,
    Observation,
    Policy,
    SupervisorState,
    decide,
)
from infra.supervisor.metrics import metric_data

log = logging.getLogger()
log.setLevel(logging.INFO)

# Environment variables (infra/constructs/supervisor.py sets them).
ENV_INSTANCE: Final = "INSTANCE"
ENV_CLUSTER_ID: Final = "CLUSTER_ID"
ENV_CHECKPOINT: Final = "CHECKPOINT_URI"
ENV_STATE: Final = "STATE_URI"
ENV_STEP: Final = "STEP"
ENV_POLICY: Final = "POLICY"
ENV_TOPIC: Final = "ALARM_TOPIC_ARN"

CLUSTER_READY: Final = frozenset({"RUNNING", "WAITING"})
CLUSTER_STARTING: Final = frozenset({"STARTING", "BOOTSTRAPPING"})
STEP_UNDER_WAY: Final = ("PENDING", "RUNNING")
# SNS subjects are at most 100 characters
# (https://docs.aws.amazon.com/sns/latest/api/API_Publish.html).
MAX_SUBJECT: Final = 100


@dataclass(frozen=True)
class Settings:
    instance: str
    cluster_id: str
    checkpoint_uri: str
    state_uri: str
    step: dict[str, Any]
    policy: Policy
    topic_arn: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        missing = [
            name
            for name in (ENV_INSTANCE, ENV_CLUSTER_ID, ENV_CHECKPOINT, ENV_STATE, ENV_STEP)
            if not env.get(name)
        ]
        if missing:
            raise ValueError(f"environment: {missing[0]} is not set; the construct sets it")
        step = json.loads(env[ENV_STEP])
        if not isinstance(step, dict) or "HadoopJarStep" not in step:
            raise ValueError(f"environment: {ENV_STEP} is not an EMR step (no HadoopJarStep)")
        return cls(
            instance=env[ENV_INSTANCE],
            cluster_id=env[ENV_CLUSTER_ID],
            checkpoint_uri=env[ENV_CHECKPOINT],
            state_uri=env[ENV_STATE],
            step=step,
            policy=Policy(**json.loads(env.get(ENV_POLICY) or "{}")),
            topic_arn=env.get(ENV_TOPIC, ""),
        )


def _cluster(emr: Any, settings: Settings) -> tuple[ClusterState, str, bool]:
    """(state, detail, a start under way) from the EMR API."""
    status = emr.describe_cluster(ClusterId=settings.cluster_id)["Cluster"]["Status"]
    state = str(status["State"])
    if state in CLUSTER_STARTING:
        return "starting", state, False
    if state not in CLUSTER_READY:
        reason = status.get("StateChangeReason", {}).get("Message", "")
        return "gone", f"{settings.cluster_id} {state} {reason}".strip(), False
    steps = emr.list_steps(ClusterId=settings.cluster_id, StepStates=list(STEP_UNDER_WAY))
    name = settings.step.get("Name")
    pending = any(step.get("Name") == name for step in steps.get("Steps", ()))
    return "ready", state, pending


def observe(s3: Any, emr: Any, settings: Settings, now: float) -> Observation:
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
    cluster, detail, pending = _cluster(emr, settings)
    return Observation(
        now=now,
        running=s3_lease_state(lease, body, now).running,
        exit=record,
        start_pending=pending,
        cluster=cluster,
        cluster_detail=detail,
    )


def load_state(s3: Any, settings: Settings) -> SupervisorState:
    bucket, key = parse_s3_uri(settings.state_uri)
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return SupervisorState()
    return SupervisorState.from_json(body, settings.state_uri)


def act(decision: Decision, clients: Mapping[str, Any], settings: Settings, now: float) -> None:
    """Carry the decision out, then save the state and publish the metrics."""
    if decision.action == "restart":
        reply = clients["emr"].add_job_flow_steps(
            JobFlowId=settings.cluster_id, Steps=[settings.step]
        )
        log.warning(
            "restarted %s: step %s; %s", settings.instance, reply["StepIds"], decision.message
        )
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
    observation = observe(clients["s3"], clients["emr"], settings, now)
    decision = decide(observation, load_state(clients["s3"], settings), settings.policy)
    act(decision, clients, settings, now)
    return decision


def _clients() -> dict[str, Any]:
    import boto3
    from botocore.config import Config

    # Bounded: a check must finish well inside the function's timeout.
    config = Config(connect_timeout=5, read_timeout=10, retries={"max_attempts": 3})
    return {name: boto3.client(name, config=config) for name in ("s3", "emr", "sns", "cloudwatch")}


def handler(_event: object, _context: object) -> dict[str, str]:
    decision = check(_clients(), Settings.from_env(os.environ), time.time())
    return {"action": decision.action, "reason": decision.reason, "message": decision.message}
