"""The supervisor's Lambda handler against moto (in-process): it reads the
lease, the exit record and the cluster, adds the stack's step on a restart,
publishes the reason to the alarm topic when it gives up, and keeps its state
and metrics where status and the alarm read them. And CloudFormation's
rollback of an EMR update replayed: the stack's step hands back, once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.backends import get_backend
from moto.core import DEFAULT_ACCOUNT_ID

from infra import s3_keys
from infra.emr_step import StepSpec, build_step
from infra.supervisor import handler
from infra.supervisor.decision import HANDBACK, Policy, SupervisorState
from model import contract
from model.exit_record import ExitRecord, write_exit_record
from model.job_version import version_in
from tests.infra.list_only_s3 import ListOnlyS3

REGION = "us-east-1"
INSTANCE = "orders-us-east-1"
BUCKET = "data-bucket"
CHECKPOINT = f"s3://{BUCKET}/checkpoints/{INSTANCE}/"
STATE = f"s3://{BUCKET}/control/{INSTANCE}/{contract.SUPERVISOR_STATE_NAME}"
MARKER = f"s3://{BUCKET}/control/{INSTANCE}/stop"


def job_step(version: str) -> dict[str, Any]:
    """The stack's step of one job version (infra/constructs/job_deployment.py)."""
    return build_step(
        StepSpec(
            step_name=f"streaming-{INSTANCE}-{version}",
            app_name=contract.app_name(INSTANCE),
            package_uri=f"s3://artifacts/job/{version}",
            stop_marker_uri=f"s3://{BUCKET}/control/{INSTANCE}/stop",
            jar_files=("a-1.jar",),
            checkpoint_uri=CHECKPOINT,
        )
    )


STEP = job_step("v1")
STEP_V2 = job_step("v2")
# What each job version records in its lease (job/driver.py: its --config).
V1 = version_in(STEP["HadoopJarStep"]["Args"])
V2 = version_in(STEP_V2["HadoopJarStep"]["Args"])
# A stack moto can create: the status is what the supervisor reads of it.
TEMPLATE = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
POLICY = Policy(max_restarts=2, backoff_sec=1, backoff_max_sec=1, start_grace_sec=60)


def alarm_inbox(clients: dict[str, Any]) -> tuple[str, str]:
    """An alarm topic and the SQS queue that receives what it publishes."""
    topic = clients["sns"].create_topic(Name="alarms")["TopicArn"]
    queue = clients["sqs"].create_queue(QueueName="inbox")["QueueUrl"]
    queue_arn = clients["sqs"].get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    clients["sns"].subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    return topic, queue


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    with mock_aws():
        clients = {
            n: boto3.client(n, region_name=REGION)
            for n in ("s3", "emr", "sns", "cloudwatch", "sqs", "cloudformation")
        }
        clients["s3"].create_bucket(Bucket=BUCKET)
        stack = clients["cloudformation"].create_stack(
            StackName="Streaming-orders-us-east-1", TemplateBody=json.dumps(TEMPLATE)
        )["StackId"]
        cluster = clients["emr"].run_job_flow(
            Name="c",
            ReleaseLabel="emr-7.0.0",
            Instances={"MasterInstanceType": "m5.xlarge", "InstanceCount": 1,
                       "KeepJobFlowAliveWhenNoSteps": True},
            JobFlowRole="EMR_EC2_DefaultRole",
            ServiceRole="EMR_DefaultRole",
        )  # fmt: skip
        topic, queue = alarm_inbox(clients)
        env = {
            handler.ENV_INSTANCE: INSTANCE,
            handler.ENV_CLUSTER_ID: cluster["JobFlowId"],
            handler.ENV_CHECKPOINT: CHECKPOINT,
            handler.ENV_STATE: STATE,
            handler.ENV_STEP: json.dumps(STEP),
            handler.ENV_POLICY: json.dumps(POLICY.__dict__),
            handler.ENV_TOPIC: topic,
            handler.ENV_STOP_MARKER: MARKER,
            handler.ENV_STACK_ARN: stack,
        }
        yield {
            **clients,
            "env": env,
            "cluster": cluster["JobFlowId"],
            "queue": queue,
            "stack": stack,
        }


def settings(aws: dict[str, Any]) -> handler.Settings:
    return handler.Settings.from_env(aws["env"])


def put_lease(aws: dict[str, Any], expires_at: float, version: str | None = None) -> None:
    """The job's lease as model.lease.S3Lease writes it; without a version as
    a job from before the field wrote it."""
    raw: dict[str, Any] = {"owner": "node:1", "instance": INSTANCE, "expires_at": expires_at}
    if version is not None:
        raw["version"] = version
    aws["s3"].put_object(Bucket=BUCKET, Key=f"checkpoints/{INSTANCE}/_lease", Body=json.dumps(raw))


def job_steps(aws: dict[str, Any], step: dict[str, Any] = STEP) -> list[dict[str, Any]]:
    steps = aws["emr"].list_steps(ClusterId=aws["cluster"])["Steps"]
    return [s for s in steps if s["Name"] == step["Name"]]


def test_a_running_job_is_left_alone(aws: dict[str, Any]) -> None:
    now = time.time()
    put_lease(aws, now + 30)
    decision = handler.check(aws, settings(aws), now)
    assert decision.action == "none" and decision.reason == "running"
    assert job_steps(aws) == []
    saved = json.loads(
        aws["s3"].get_object(Bucket=BUCKET, Key=STATE.split("/", 3)[3])["Body"].read()
    )
    assert saved["last_seen_running"] == now


def test_a_failed_job_gets_the_stacks_step_and_the_restart_is_not_repeated(
    aws: dict[str, Any],
) -> None:
    now = time.time()
    put_lease(aws, now + 30)
    handler.check(aws, settings(aws), now)
    put_lease(aws, now - 1)  # expired: the holder died
    failed = ExitRecord(1, contract.EXIT_BATCH_FAILED, "batch 9 failed", now + 5, "node:1")
    write_exit_record(CHECKPOINT, failed, aws["s3"])
    decision = handler.check(aws, settings(aws), now + 10)
    assert decision.action == "restart" and decision.reason == contract.EXIT_BATCH_FAILED
    [step] = job_steps(aws)
    described = aws["emr"].describe_step(ClusterId=aws["cluster"], StepId=step["Id"])["Step"]
    assert described["Config"]["Args"] == STEP["HadoopJarStep"]["Args"]
    assert described["ActionOnFailure"] == "CONTINUE"
    # The next check sees its step under way (moto never runs steps): no second restart.
    again = handler.check(aws, settings(aws), now + 20)
    assert again.action == "none" and again.reason == "starting"
    assert len(job_steps(aws)) == 1
    points = aws["cloudwatch"].list_metrics(Namespace=contract.metric_namespace(INSTANCE))
    assert {m["MetricName"] for m in points["Metrics"]} == {
        contract.SUPERVISOR_RESTARTS,
        contract.SUPERVISOR_GAVE_UP,
    }


def test_an_unrecoverable_exit_publishes_the_reason_and_adds_no_step(aws: dict[str, Any]) -> None:
    now = time.time()
    refused = ExitRecord(
        2, contract.EXIT_CHECKPOINT_REFUSED, "checkpoint holds the old operator", now - 5, "n:1"
    )
    write_exit_record(CHECKPOINT, refused, aws["s3"])
    decision = handler.check(aws, settings(aws), now)
    assert decision.action == "alarm"
    assert job_steps(aws) == []
    messages = aws["sqs"].receive_message(QueueUrl=aws["queue"], MaxNumberOfMessages=10)
    [message] = messages["Messages"]
    body = json.loads(message["Body"])
    assert body["Subject"] == f"{INSTANCE} supervisor: {contract.EXIT_CHECKPOINT_REFUSED}"
    assert "checkpoint holds the old operator" in body["Message"]
    assert "a restart cannot cure it" in body["Message"]


def test_a_terminated_cluster_alarms(aws: dict[str, Any]) -> None:
    aws["emr"].set_termination_protection(JobFlowIds=[aws["cluster"]], TerminationProtected=False)
    aws["emr"].terminate_job_flows(JobFlowIds=[aws["cluster"]])
    decision = handler.check(aws, settings(aws), time.time())
    assert decision.action == "alarm"
    assert "TERMINATED" in decision.message


def test_missing_settings_name_the_variable() -> None:
    with pytest.raises(ValueError, match="CLUSTER_ID is not set"):
        handler.Settings.from_env({handler.ENV_INSTANCE: "x"})
    env = {
        handler.ENV_INSTANCE: "x",
        handler.ENV_CLUSTER_ID: "j-1",
        handler.ENV_STACK_ARN: "arn:aws:cloudformation:us-east-1:1:stack/s/1",
        handler.ENV_CHECKPOINT: CHECKPOINT,
        handler.ENV_STATE: STATE,
        handler.ENV_STEP: "{}",
        handler.ENV_STOP_MARKER: MARKER,
    }
    with pytest.raises(ValueError, match="STEP is not an EMR step"):
        handler.Settings.from_env(env)


def supervised_keys(instance: str) -> list[str]:
    """The keys a check looks up (each by listing its exact prefix)."""
    return sorted(
        f"{folder}/{instance}/{name}"
        for folder, name in (
            ("checkpoints", "_lease"),
            ("checkpoints", "_exit"),
            ("control", "stop"),
            ("control", contract.SUPERVISOR_STATE_NAME),
        )
    )


def test_whether_a_key_exists_is_asked_by_listing_its_exact_prefix(aws: dict[str, Any]) -> None:
    """Nothing exists yet (first deploy) and GetObject of a
    missing key would be denied: the check still works, by ListObjectsV2."""
    s3 = ListOnlyS3(aws["s3"])
    clients = {**aws, "s3": s3}
    decision = handler.check(clients, settings(aws), time.time())
    assert decision.action == "none" and decision.reason == "starting"
    assert sorted(set(s3.listed)) == supervised_keys(INSTANCE)


def test_a_key_that_only_shares_the_prefix_does_not_exist(aws: dict[str, Any]) -> None:
    aws["s3"].put_object(Bucket=BUCKET, Key=f"checkpoints/{INSTANCE}/_exit.tmp", Body=b"{}")
    s3 = ListOnlyS3(aws["s3"])
    assert not s3_keys.key_exists(s3, BUCKET, f"checkpoints/{INSTANCE}/_exit")
    assert s3_keys.read_if_present(s3, f"s3://{BUCKET}/checkpoints/{INSTANCE}/_exit") is None
    aws["s3"].put_object(Bucket=BUCKET, Key=f"checkpoints/{INSTANCE}/_exit", Body=b"{}")
    assert s3_keys.key_exists(s3, BUCKET, f"checkpoints/{INSTANCE}/_exit")


def test_an_operators_marker_keeps_a_job_that_died_without_a_record_stopped(
    aws: dict[str, Any],
) -> None:
    """On AWS, the lease expired (the job was killed while it
    stopped), no exit record, the operator's marker is there: no step."""
    now = time.time()
    put_lease(aws, now + 30)
    handler.check(aws, settings(aws), now)
    put_lease(aws, now - 1)
    aws["s3"].put_object(Bucket=BUCKET, Key=f"control/{INSTANCE}/stop", Body=b"stop\n")
    for later in (now + 60, now + 3_600):
        decision = handler.check(aws, settings(aws), later)
        assert decision.action == "none" and decision.reason == contract.EXIT_STOPPED_ON_REQUEST
    assert job_steps(aws) == []
    # A handover's marker is not an operator's (the launcher's own).
    assert handler.operator_stop_requested(b"handover requested 2026-01-01T00:00:00Z\n") is False
    assert handler.operator_stop_requested(b"") is True
    assert handler.operator_stop_requested(None) is False


# --------------------------------------------------------------------------- rollback
# CloudFormation's statuses and EMR's step states that moto does not move by
# itself: set in its backend, as CloudFormation and the launcher would.


def set_stack_status(aws: dict[str, Any], status: str) -> None:
    get_backend("cloudformation")[DEFAULT_ACCOUNT_ID][REGION].stacks[aws["stack"]].status = status


def complete_steps(aws: dict[str, Any]) -> None:
    """The launcher submitted the job and exited: its step is COMPLETED
    (``spark.yarn.submit.waitAppCompletion=false``, infra/emr_step.py)."""
    cluster = get_backend("emr")[DEFAULT_ACCOUNT_ID][REGION].clusters[aws["cluster"]]
    for step in cluster.steps:
        step.state = "COMPLETED"


def settings_with(aws: dict[str, Any], step: dict[str, Any]) -> handler.Settings:
    """The supervisor's environment when the stack's step is ``step``."""
    return handler.Settings.from_env({**aws["env"], handler.ENV_STEP: json.dumps(step)})


def test_the_rollback_of_an_emr_update_hands_back_to_the_stacks_step_once(
    aws: dict[str, Any],
) -> None:
    """v1 runs; an update's v2 step hands over, then the update fails further on
    and CloudFormation rolls back: the stack's step, and the supervisor's
    STEP, are v1 again while v2 runs on. The supervisor adds the v1 step
    exactly once, only after the rollback completed, and one job runs v1."""
    now = time.time()
    v1, v2 = settings_with(aws, STEP), settings_with(aws, STEP_V2)
    assert V1 is not None and V2 is not None and V1 != V2
    # Create: CloudFormation's v1 step started the job, which holds the lease.
    aws["emr"].add_job_flow_steps(JobFlowId=aws["cluster"], Steps=[STEP])
    complete_steps(aws)
    put_lease(aws, now + 30, V1)
    assert handler.check(aws, v1, now).action == "none"
    # Update: CloudFormation adds the v2 step; its launcher hands over; v2 holds the lease.
    set_stack_status(aws, "UPDATE_IN_PROGRESS")
    aws["emr"].add_job_flow_steps(JobFlowId=aws["cluster"], Steps=[STEP_V2])
    complete_steps(aws)
    put_lease(aws, now + 90, V2)
    for settings in (v1, v2):  # the supervisor's function is updated mid-way too
        during = handler.check(aws, settings, now + 60)
        assert during.action == "none" and during.reason == "running"
    assert "the stack is UPDATE_IN_PROGRESS" in handler.check(aws, v1, now + 61).message
    # A later resource fails: the rollback restores v1 as the stack's step.
    for status in ("UPDATE_ROLLBACK_IN_PROGRESS", "UPDATE_ROLLBACK_COMPLETE_CLEANUP_IN_PROGRESS"):
        set_stack_status(aws, status)
        assert handler.check(aws, v1, now + 70).action == "none"
    assert len(job_steps(aws)) == 1, "nothing added while the stack was not settled"
    # Rolled back: the stack's v1 step is added, once.
    set_stack_status(aws, "UPDATE_ROLLBACK_COMPLETE")
    handback = handler.check(aws, v1, now + 80)
    assert handback.action == "handback" and handback.reason == HANDBACK
    assert len(job_steps(aws)) == 2
    [added] = [s for s in job_steps(aws) if s["Status"]["State"] in ("PENDING", "RUNNING")]
    described = aws["emr"].describe_step(ClusterId=aws["cluster"], StepId=added["Id"])["Step"]
    assert described["Config"]["Args"] == STEP["HadoopJarStep"]["Args"]
    # Its launcher waits for v2 to stop: the step is under way, nothing more.
    put_lease(aws, now + 150, V2)
    waiting = handler.check(aws, v1, now + 140)
    assert waiting.action == "none" and "a start is under way" in waiting.message
    # v2 stops for the handover, the launcher submits v1 and completes.
    aws["s3"].delete_object(Bucket=BUCKET, Key=f"checkpoints/{INSTANCE}/_lease")
    handed = ExitRecord(
        0,
        contract.EXIT_STOPPED_ON_REQUEST,
        "handover",
        now + 150,
        "node:2",
        contract.STOP_BY_HANDOVER,
    )
    write_exit_record(CHECKPOINT, handed, aws["s3"])
    complete_steps(aws)
    between = handler.check(aws, v1, now + 160)
    assert between.action == "none" and "handed over" in between.message
    # v1 takes the lease: one job, on the stack's version; nothing more is added.
    for later in (now + 200, now + 2_000):
        put_lease(aws, later + 30, V1)  # renewed as long as it runs
        settled = handler.check(aws, v1, later)
        assert settled.action == "none" and settled.message == "the job runs (its lease is held)"
    assert len(job_steps(aws)) == 2 and job_steps(aws, STEP_V2)[0]["Status"]["State"] == (
        "COMPLETED"
    )
    state = SupervisorState.from_json(
        aws["s3"].get_object(Bucket=BUCKET, Key=STATE.split("/", 3)[3])["Body"].read()
    )
    assert state.restarts == () and state.handbacks == (now + 80,)


def test_a_job_without_a_version_in_its_lease_is_never_handed_back(aws: dict[str, Any]) -> None:
    """A lease written by a job from before the field: unknown, left alone,
    and the stack is not even asked."""
    now = time.time()
    put_lease(aws, now + 30)
    set_stack_status(aws, "UPDATE_ROLLBACK_COMPLETE")
    calls: list[str] = []

    class Watched:
        def describe_stacks(self, **kw: Any) -> Any:
            calls.append(kw["StackName"])
            return aws["cloudformation"].describe_stacks(**kw)

    decision = handler.check({**aws, "cloudformation": Watched()}, settings(aws), now)
    assert decision.action == "none" and job_steps(aws) == []
    assert calls == []
    # A versioned lease of another version: the stack is asked, by its ID only.
    put_lease(aws, now + 30, V2)
    decision = handler.check({**aws, "cloudformation": Watched()}, settings(aws), now + 1)
    assert decision.action == "handback" and calls == [aws["stack"]]
