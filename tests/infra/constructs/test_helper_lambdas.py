"""CDK's helper Lambdas (the upload handler; the bucket auto-delete provider of
DESTROY stacks) and ours: no AWS managed execution policy, logs in a log
group of the stack with a retention (infra/constructs/helper_lambdas.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.synth

ALL = (
    "Streaming-orders-ap-northeast-2",
    "Streaming-payments-ap-northeast-2",
    "Streaming-orders-eu-west-1",
)


def _functions(resources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        logical_id: r for logical_id, r in resources.items() if r["Type"] == "AWS::Lambda::Function"
    }


@pytest.mark.parametrize("name", ALL)
def test_no_role_uses_the_managed_lambda_execution_policy(
    synthesized: Synthesized, name: str
) -> None:
    resources = synthesized.templates[name]["Resources"]
    roles = {i: r for i, r in resources.items() if r["Type"] == "AWS::IAM::Role"}
    # Every function's role is among the roles checked (and there is one).
    function_roles = {
        f["Properties"]["Role"]["Fn::GetAtt"][0] for f in _functions(resources).values()
    }
    assert function_roles and function_roles <= set(roles), function_roles
    for logical_id, role in roles.items():
        arns = json.dumps(role["Properties"].get("ManagedPolicyArns", []))
        assert "AWSLambdaBasicExecutionRole" not in arns, logical_id


@pytest.mark.parametrize("name", ALL)
def test_every_function_logs_to_a_group_of_the_stack_with_a_retention(
    synthesized: Synthesized, name: str
) -> None:
    resources = synthesized.templates[name]["Resources"]
    functions = _functions(resources)
    assert functions
    groups = {
        json.dumps(r["Properties"]["LogGroupName"], sort_keys=True): r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::Logs::LogGroup"
    }
    for logical_id, function in functions.items():
        logging = function["Properties"].get("LoggingConfig")
        if logging is not None:
            group = resources[logging["LogGroup"]["Ref"]]["Properties"]
        else:  # Lambda's default group, /aws/lambda/<function>, made by the stack
            default = {"Fn::Join": ["", ["/aws/lambda/", {"Ref": logical_id}]]}
            group = groups[json.dumps(default, sort_keys=True)]
        assert 0 < group["RetentionInDays"] <= 90, logical_id
        assert "KmsKeyId" in group, logical_id


def test_the_auto_delete_provider_exists_only_where_buckets_are_emptied(
    synthesized: Synthesized,
) -> None:
    """DESTROY (orders-eu-west-1): its role writes its own log group only, and
    the emptying custom resources wait for that group."""
    resources = synthesized.templates["Streaming-orders-eu-west-1"]["Resources"]
    (handler_id,) = [i for i in _functions(resources) if i.startswith("CustomS3AutoDelete")]
    role_id = resources[handler_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    assert "ManagedPolicyArns" not in resources[role_id]["Properties"]
    (policy,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::IAM::Policy" and r["Properties"]["Roles"] == [{"Ref": role_id}]
    ]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == ["logs:CreateLogStream", "logs:PutLogEvents"]
    assert {"Ref": handler_id} in json.loads(json.dumps(statement["Resource"]))["Fn::Join"][1]
    group_id = next(
        i
        for i in resources
        if i.startswith("AutoDeleteObjectsLogs") and "Key" not in i and "Policy" not in i
    )
    for logical_id, r in resources.items():
        if r["Type"] == "Custom::S3AutoDeleteObjects":
            assert group_id in r.get("DependsOn", []), logical_id
    for other in ("Streaming-orders-ap-northeast-2", "Streaming-payments-ap-northeast-2"):
        names = synthesized.templates[other]["Resources"]
        assert not [i for i in names if i.startswith("CustomS3AutoDelete")], other
