"""The supervisor in the synthesized stack: a Lambda on a one-minute schedule
whose role reaches only this instance's lease, exit record, stop marker and
state, this cluster (or this application and its execution role) and this
namespace; its environment carries the stack's own step (or StartJobRun
request) and the instance's policy; its give-up, its errors and it not
running have alarms on the instance's topic. The EMR one is the example's
orders-ap-northeast-2 (tests/fixtures/cdk.json), the serverless one its
payments-ap-northeast-2 with ``"compute": "serverless"`` (as in the
repository's cdk.json)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.constructs.alarms import SUPERVISOR_ERRORS, SUPERVISOR_GAVE_UP, SUPERVISOR_NOT_RUNNING
from infra.supervisor import handler, serverless
from infra.supervisor.construct import SCHEDULE_RETRY_ATTEMPTS
from model import contract
from tests.infra.conftest import Synthesized, synthesize

STACK = "Streaming-orders-ap-northeast-2"
INSTANCE = "orders-ap-northeast-2"
SERVERLESS_STACK = "Streaming-payments-ap-northeast-2"
SERVERLESS_INSTANCE = "payments-ap-northeast-2"


def _keys(instance: str) -> tuple[str, ...]:
    return (
        f"checkpoints/{instance}/_lease",
        f"checkpoints/{instance}/_exit",
        f"control/{instance}/stop",
        f"control/{instance}/supervisor.json",
    )


KEYS = _keys(INSTANCE)
# (fixture, stack, the function's handler): the supervisor on each target.
TARGETS = {
    "emr": ("synthesized", STACK, "infra.supervisor.handler.handler"),
    "serverless": ("synthesized_on_serverless", SERVERLESS_STACK, serverless.HANDLER),
}


@pytest.fixture(scope="module")
def synthesized_on_serverless(
    example_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> Synthesized:
    context = json.loads(json.dumps(example_context))
    [payments] = [
        i for i in context["streaming"]["instances"]
        if (i["domain"], i["region"]) == ("payments", "ap-northeast-2")
    ]  # fmt: skip
    context["streaming"]["instances"] = [{**payments, "compute": "serverless"}]
    return synthesize(context, tmp_path_factory.mktemp("cdk.out.supervisor_serverless"))


def _function_item(
    synthesized: Synthesized, stack: str = STACK, handler_name: str = TARGETS["emr"][2]
) -> tuple[str, dict[str, Any]]:
    functions = synthesized.resources(stack, "AWS::Lambda::Function")
    found = [
        (name, f) for name, f in functions.items()
        if f["Properties"].get("Handler") == handler_name
    ]  # fmt: skip
    assert len(found) == 1, sorted(functions)
    return found[0]


def _function(
    synthesized: Synthesized, stack: str = STACK, handler_name: str = TARGETS["emr"][2]
) -> dict[str, Any]:
    return _function_item(synthesized, stack, handler_name)[1]


def _role_statements(
    synthesized: Synthesized, role_ref: str, stack: str = STACK
) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synthesized.resources(stack, "AWS::IAM::Policy").values()
        if {"Ref": role_ref} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {
        action
        for statement in statements
        for action in (
            [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]
        )
    }


def _check_s3_grants(statements: dict[str, dict[str, Any]], instance: str) -> None:
    """Read the four keys, write the state, list exactly the four keys."""
    keys = _keys(instance)
    read = json.dumps(statements["ReadLeaseExitMarkerAndState"]["Resource"])
    for key in keys:
        assert key in read
    assert "*" not in read.replace('"*"', "")
    write = statements["WriteState"]
    assert write["Action"] == "s3:PutObject"
    assert f"control/{instance}/supervisor.json" in json.dumps(write["Resource"])
    # A missing key is seen without GetObject: ListObjectsV2 with Prefix equal to each key, on the
    # bucket, and nothing else (infra.s3_keys.key_exists; pages in its docstring).
    listing = statements["ListOwnKeysByExactPrefix"]
    assert listing["Effect"] == "Allow"
    assert listing["Action"] == "s3:ListBucket"
    assert isinstance(listing["Resource"], dict) and "Fn::GetAtt" in listing["Resource"]
    assert list(listing["Condition"]) == ["StringEquals"]
    assert list(listing["Condition"]["StringEquals"]) == ["s3:prefix"]
    assert set(listing["Condition"]["StringEquals"]["s3:prefix"]) == set(keys)


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
    # A failed delivery is retried; one check at a time.
    assert schedules[0]["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == (
        SCHEDULE_RETRY_ATTEMPTS
    )
    assert SCHEDULE_RETRY_ATTEMPTS > 0
    assert function["Properties"]["ReservedConcurrentExecutions"] == 1
    assert f"/control/{INSTANCE}/stop" in json.dumps(env[handler.ENV_STOP_MARKER])
    # Its own stack, whose status gates a hand-back after a rollback.
    assert env[handler.ENV_STACK_ARN] == {"Ref": "AWS::StackId"}


def test_the_role_reaches_only_this_instances_objects_cluster_and_namespace(
    synthesized: Synthesized,
) -> None:
    role_ref = _function(synthesized)["Properties"]["Role"]["Fn::GetAtt"][0]
    every = _role_statements(synthesized, role_ref)
    statements = {s["Sid"]: s for s in every if "Sid" in s}
    _check_s3_grants(statements, INSTANCE)
    emr = statements["RestartOnOwnCluster"]
    assert sorted(emr["Action"]) == [
        "elasticmapreduce:AddJobFlowSteps",
        "elasticmapreduce:DescribeCluster",
        "elasticmapreduce:ListSteps",
    ]
    assert "cluster/" in json.dumps(emr["Resource"])
    # DescribeStacks of its own stack only (resource-level: the stack's ID).
    stack = statements["DescribeOwnStack"]
    assert stack["Action"] == "cloudformation:DescribeStacks"
    assert stack["Resource"] == {"Ref": "AWS::StackId"}
    assert {a for a in _actions(every) if a.startswith("cloudformation:")} == {
        "cloudformation:DescribeStacks"
    }
    metrics = statements["PutMetricsInInstanceNamespace"]
    assert metrics["Condition"]["StringEquals"]["cloudwatch:namespace"] == (
        contract.metric_namespace(INSTANCE)
    )
    actions = _actions(every)
    assert "iam:PassRole" not in actions
    assert not any(a.startswith("emr-serverless:") for a in actions)
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


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_a_broken_supervisor_alarms_on_its_errors_and_on_not_running(
    target: str, request: pytest.FixtureRequest
) -> None:
    """Both alarms on the function, to the instance's topic,
    whose policies let them publish; on either target."""
    fixture, stack, handler_name = TARGETS[target]
    synthesized: Synthesized = request.getfixturevalue(fixture)
    function_ref = [_function_item(synthesized, stack, handler_name)[0]]
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in synthesized.resources(stack, "AWS::CloudWatch::Alarm").values()
    }
    topic = synthesized.one(stack, "AWS::SNS::Topic")[0]
    errors = alarms[f"{stack}-{SUPERVISOR_ERRORS}"]
    assert (errors["Namespace"], errors["MetricName"]) == ("AWS/Lambda", "Errors")
    assert errors["ComparisonOperator"] == "GreaterThanThreshold" and errors["Threshold"] == 0
    missing = alarms[f"{stack}-{SUPERVISOR_NOT_RUNNING}"]
    assert (missing["Namespace"], missing["MetricName"]) == ("AWS/Lambda", "Invocations")
    assert missing["ComparisonOperator"] == "LessThanThreshold" and missing["Threshold"] == 1
    assert missing["TreatMissingData"] == "breaching"
    for alarm in (errors, missing):
        assert alarm["Dimensions"] == [{"Name": "FunctionName", "Value": {"Ref": function_ref[0]}}]
        assert alarm["AlarmActions"] == [{"Ref": topic}]
    # The topic's policy names the alarms that may publish: these two too.
    policies = json.dumps(synthesized.resources(stack, "AWS::SNS::TopicPolicy"))
    for name in (SUPERVISOR_ERRORS, SUPERVISOR_NOT_RUNNING):
        assert f"alarm:{stack}-{name}" in policies


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


def test_the_serverless_supervisor_runs_every_minute_one_at_a_time_with_retries(
    synthesized_on_serverless: Synthesized,
) -> None:
    """The same schedule, retries and reserved concurrency as on EMR, and the
    same environment but the target's: the application and the request."""
    function = _function(synthesized_on_serverless, SERVERLESS_STACK, serverless.HANDLER)
    assert function["Properties"]["ReservedConcurrentExecutions"] == 1
    env = function["Properties"]["Environment"]["Variables"]
    assert handler.ENV_CLUSTER_ID not in env and handler.ENV_STEP not in env
    assert handler.ENV_STACK_ARN not in env  # no hand-back on EMR Serverless
    assert set(env) >= {serverless.ENV_APPLICATION_ID, serverless.ENV_REQUEST}
    assert f"/control/{SERVERLESS_INSTANCE}/stop" in json.dumps(env[handler.ENV_STOP_MARKER])
    application = synthesized_on_serverless.one(SERVERLESS_STACK, "AWS::EMRServerless::Application")
    assert env[serverless.ENV_APPLICATION_ID] == {"Fn::GetAtt": [application[0], "ApplicationId"]}
    rules = synthesized_on_serverless.resources(SERVERLESS_STACK, "AWS::Events::Rule")
    schedules = [r["Properties"] for r in rules.values() if "ScheduleExpression" in r["Properties"]]
    assert [s["ScheduleExpression"] for s in schedules] == ["rate(1 minute)"]
    assert schedules[0]["Targets"][0]["RetryPolicy"]["MaximumRetryAttempts"] == (
        SCHEDULE_RETRY_ATTEMPTS
    )


def test_the_serverless_role_starts_runs_on_its_application_and_passes_its_role_only(
    synthesized_on_serverless: Synthesized,
) -> None:
    synth = synthesized_on_serverless
    assert synth.error is None, synth.error  # cdk-nag: the jobruns/* grant is acknowledged
    function = _function(synth, SERVERLESS_STACK, serverless.HANDLER)
    role_ref = function["Properties"]["Role"]["Fn::GetAtt"][0]
    every = _role_statements(synth, role_ref, SERVERLESS_STACK)
    statements = {s["Sid"]: s for s in every if "Sid" in s}
    _check_s3_grants(statements, SERVERLESS_INSTANCE)
    application_id, _ = synth.one(SERVERLESS_STACK, "AWS::EMRServerless::Application")
    runs = statements["RestartOnOwnApplication"]
    assert sorted(runs["Action"]) == [
        "emr-serverless:GetApplication",
        "emr-serverless:ListJobRuns",
        "emr-serverless:StartJobRun",
    ]
    resources = [json.dumps(r) for r in runs["Resource"]]
    assert len(resources) == 2
    for resource in resources:
        assert application_id in resource and ":/applications/" in resource
    assert resources[1].endswith('/jobruns/*"]]}')
    # iam:PassRole of the request's execution role, to EMR Serverless only.
    _, job_run = synth.one(SERVERLESS_STACK, "Custom::ServerlessJobRun")
    passing = [s for s in every if "iam:PassRole" in _actions([s])]
    assert passing == [statements["PassExecutionRole"]]
    assert passing[0]["Action"] == "iam:PassRole"
    assert passing[0]["Resource"] == job_run["Properties"]["StartJobRun"]["executionRoleArn"]
    assert passing[0]["Condition"] == {
        "StringEquals": {"iam:PassedToService": "emr-serverless.amazonaws.com"}
    }
    actions = _actions(every)
    assert not any(a.startswith(("elasticmapreduce:", "cloudformation:")) for a in actions)
    assert "sns:Publish" in actions and "cloudwatch:PutMetricData" in actions
