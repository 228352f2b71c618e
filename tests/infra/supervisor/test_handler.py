"""The supervisor's Lambda handler against moto (in-process): it reads the
lease, the exit record and the cluster, adds the stack's step on a restart,
publishes the reason to the alarm topic when it gives up, and keeps its state
and metrics where status and the alarm read them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra import s3_keys
from infra.emr_step import StepSpec, build_step
from infra.supervisor import handler
from infra.supervisor.decision import Policy
from model import contract
from model.exit_record import ExitRecord, write_exit_record
from tests.infra.list_only_s3 import ListOnlyS3

REGION = "us-east-1"
INSTANCE = "orders-us-east-1"
BUCKET = "data-bucket"
CHECKPOINT = f"s3://{BUCKET}/checkpoints/{INSTANCE}/"
STATE = f"s3://{BUCKET}/control/{INSTANCE}/{contract.SUPERVISOR_STATE_NAME}"
MARKER = f"s3://{BUCKET}/control/{INSTANCE}/stop"
STEP = build_step(
    StepSpec(
        step_name=f"streaming-{INSTANCE}-v1",
        app_name=contract.app_name(INSTANCE),
        package_uri="s3://artifacts/job/v1",
        stop_marker_uri=f"s3://{BUCKET}/control/{INSTANCE}/stop",
        jar_files=("a-1.jar",),
        checkpoint_uri=CHECKPOINT,
    )
)
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
            for n in ("s3", "emr", "sns", "cloudwatch", "sqs")
        }
        clients["s3"].create_bucket(Bucket=BUCKET)
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
        }
        yield {**clients, "env": env, "cluster": cluster["JobFlowId"], "queue": queue}


def settings(aws: dict[str, Any]) -> handler.Settings:
    return handler.Settings.from_env(aws["env"])


def put_lease(aws: dict[str, Any], expires_at: float) -> None:
    body = json.dumps({"owner": "node:1", "instance": INSTANCE, "expires_at": expires_at})
    aws["s3"].put_object(Bucket=BUCKET, Key=f"checkpoints/{INSTANCE}/_lease", Body=body)


def job_steps(aws: dict[str, Any]) -> list[dict[str, Any]]:
    steps = aws["emr"].list_steps(ClusterId=aws["cluster"])["Steps"]
    return [s for s in steps if s["Name"] == STEP["Name"]]


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
