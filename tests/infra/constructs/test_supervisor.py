"""The supervisor in the synthesized stack: a Lambda on a one-minute schedule
whose role reaches only this instance's lease, exit record and state, this
cluster and this namespace; its environment carries the stack's own step and
the instance's policy; its give-up has an alarm on the instance's topic."""

from __future__ import annotations

import json
from typing import Any

from app import contract
from infra.constructs.alarms import SUPERVISOR_ERRORS, SUPERVISOR_GAVE_UP, SUPERVISOR_NOT_RUNNING
from infra.constructs.supervisor import SCHEDULE_RETRY_ATTEMPTS
from infra.supervisor import handler
from tests.infra.conftest import Synthesized

STACK = "Streaming-orders-ap-northeast-2"
INSTANCE = "orders-ap-northeast-2"
KEYS = (
    f"checkpoints/{INSTANCE}/_lease",
    f"checkpoints/{INSTANCE}/_exit",
    f"control/{INSTANCE}/stop",
    f"control/{INSTANCE}/supervisor.json",
)


def _function(synthesized: Synthesized) -> dict[str, Any]:
    functions = synthesized.resources(STACK, "AWS::Lambda::Function")
    found = [
        f for f in functions.values()
        if f["Properties"].get("Handler") == "infra.supervisor.handler.handler"
    ]  # fmt: skip
    assert len(found) == 1, sorted(functions)
    return found[0]


def _role_statements(synthesized: Synthesized, role_ref: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synthesized.resources(STACK, "AWS::IAM::Policy").values()
        if {"Ref": role_ref} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_the_function_runs_every_minute_with_the_stacks_step(synthesized: Synthesized) -> None:
    function = _function(synthesized)
    env = function["Properties"]["Environment"]["Variables"]
    assert env[handler.ENV_INSTANCE] == INSTANCE
    assert env[handler.ENV_CLUSTER_ID] == {"Ref": synthesized.one(STACK, "AWS::EMR::Cluster")[0]}
    policy = json.loads(env[handler.ENV_POLICY])
    assert policy["max_restarts"] == 5 and policy["window_sec"] == 3_600
    # The step is the one the stack's AWS::EMR::Step runs (same launcher and args).
    step = synthesized.one(STACK, "AWS::EMR::Step")[1]["Properties"]
    rendered = json.dumps(env[handler.ENV_STEP])
    assert "/usr/local/bin/streaming-spark-submit" in rendered
    assert step["Name"] in rendered
    assert "--lease" in rendered and "_lease" in rendered
    rules = synthesized.resources(STACK, "AWS::Events::Rule")
    schedules = [r["Properties"] for r in rules.values() if "ScheduleExpression" in r["Properties"]]
    assert [s["ScheduleExpression"] for s in schedules] == ["rate(1 minute)"]
    # Issue 41 item 8: a failed delivery is retried; one check at a time.
    assert schedules[0]["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == (
        SCHEDULE_RETRY_ATTEMPTS
    )
    assert SCHEDULE_RETRY_ATTEMPTS > 0
    assert function["Properties"]["ReservedConcurrentExecutions"] == 1
    assert f"/control/{INSTANCE}/stop" in json.dumps(env[handler.ENV_STOP_MARKER])


def test_the_role_reaches_only_this_instances_objects_cluster_and_namespace(
    synthesized: Synthesized,
) -> None:
    role_ref = _function(synthesized)["Properties"]["Role"]["Fn::GetAtt"][0]
    every = _role_statements(synthesized, role_ref)
    statements = {s["Sid"]: s for s in every if "Sid" in s}
    read = json.dumps(statements["ReadLeaseExitMarkerAndState"]["Resource"])
    for key in KEYS:
        assert key in read
    assert "*" not in read.replace('"*"', "")
    write = statements["WriteState"]
    assert write["Action"] == "s3:PutObject"
    assert f"control/{INSTANCE}/supervisor.json" in json.dumps(write["Resource"])
    # Issue 41 item 7: ListObjectsV2 with Prefix equal to each key, on the
    # bucket, and nothing else (handler.key_exists; pages in its docstring).
    listing = statements["ListOwnKeysByExactPrefix"]
    assert listing["Effect"] == "Allow"
    assert listing["Action"] == "s3:ListBucket"
    assert isinstance(listing["Resource"], dict) and "Fn::GetAtt" in listing["Resource"]
    assert list(listing["Condition"]) == ["StringEquals"]
    assert list(listing["Condition"]["StringEquals"]) == ["s3:prefix"]
    assert set(listing["Condition"]["StringEquals"]["s3:prefix"]) == set(KEYS)
    emr = statements["RestartOnOwnCluster"]
    assert sorted(emr["Action"]) == [
        "elasticmapreduce:AddJobFlowSteps",
        "elasticmapreduce:DescribeCluster",
        "elasticmapreduce:ListSteps",
    ]
    assert "cluster/" in json.dumps(emr["Resource"])
    metrics = statements["PutMetricsInInstanceNamespace"]
    assert metrics["Condition"]["StringEquals"]["cloudwatch:namespace"] == (
        contract.metric_namespace(INSTANCE)
    )
    actions = {
        action
        for statement in every
        for action in (
            [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        )
    }
    assert "iam:PassRole" not in actions
    assert "sns:Publish" in actions


def test_giving_up_has_an_alarm_on_the_instances_topic(synthesized: Synthesized) -> None:
    alarms = synthesized.resources(STACK, "AWS::CloudWatch::Alarm")
    [alarm] = [
        a["Properties"] for a in alarms.values()
        if a["Properties"]["AlarmName"] == f"{STACK}-{SUPERVISOR_GAVE_UP}"
    ]  # fmt: skip
    assert alarm["MetricName"] == contract.SUPERVISOR_GAVE_UP
    assert alarm["Namespace"] == contract.metric_namespace(INSTANCE)
    assert alarm["Threshold"] == 0 and alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    topic = synthesized.one(STACK, "AWS::SNS::Topic")[0]
    assert alarm["AlarmActions"] == [{"Ref": topic}]


def test_a_broken_supervisor_alarms_on_its_errors_and_on_not_running(
    synthesized: Synthesized,
) -> None:
    """Issue 41 item 8: both alarms on the function, to the instance's topic,
    whose policies let them publish."""
    function_ref = [
        name for name, f in synthesized.resources(STACK, "AWS::Lambda::Function").items()
        if f["Properties"].get("Handler") == "infra.supervisor.handler.handler"
    ]  # fmt: skip
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in synthesized.resources(STACK, "AWS::CloudWatch::Alarm").values()
    }
    topic = synthesized.one(STACK, "AWS::SNS::Topic")[0]
    errors = alarms[f"{STACK}-{SUPERVISOR_ERRORS}"]
    assert (errors["Namespace"], errors["MetricName"]) == ("AWS/Lambda", "Errors")
    assert errors["ComparisonOperator"] == "GreaterThanThreshold" and errors["Threshold"] == 0
    missing = alarms[f"{STACK}-{SUPERVISOR_NOT_RUNNING}"]
    assert (missing["Namespace"], missing["MetricName"]) == ("AWS/Lambda", "Invocations")
    assert missing["ComparisonOperator"] == "LessThanThreshold" and missing["Threshold"] == 1
    assert missing["TreatMissingData"] == "breaching"
    for alarm in (errors, missing):
        assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function_ref[0]}}]
        assert alarm["AlarmActions"] == [{"Ref": topic}]
    # The topic's policy names the alarms that may publish: these two too.
    policies = json.dumps(synthesized.resources(STACK, "AWS::SNS::TopicPolicy"))
    for name in (SUPERVISOR_ERRORS, SUPERVISOR_NOT_RUNNING):
        assert f"alarm:{STACK}-{name}" in policies


def _longest(value: Any) -> str:
    """A template value as the longest string it may resolve to: a Ref or
    GetAtt as 128 characters (more than a bucket name's 63 or a cluster id)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_longest(p) for p in parts)
    if isinstance(value, dict) and ({"Ref", "Fn::GetAtt"} & set(value)):
        return "x" * 128
    raise AssertionError(f"unexpected template value {value!r}")


def test_the_environment_fits_lambdas_4_kb(synthesized: Synthesized) -> None:
    """https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html"""
    env = _function(synthesized)["Properties"]["Environment"]["Variables"]
    size = sum(len(k) + len(_longest(v).encode()) for k, v in env.items())
    assert size < 4_096, size
    print(f"\nsupervisor environment: at most {size} bytes of 4096")
