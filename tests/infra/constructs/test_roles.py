"""infra/constructs/roles.py: the one rule for a function's dependency on its
role (its DefaultPolicy only), which the supervisor, the Serverless job-run
resource and the security-group cleanup all apply."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from infra.constructs.roles import depend_on_policy_only


def _function_with_role(*, granted: bool, apply: bool) -> tuple[Mapping[str, Any], Template]:
    stack = Stack(App(), "Roles")
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    if granted:
        role.add_to_principal_policy(
            iam.PolicyStatement(actions=["s3:GetObject"], resources=["arn:aws:s3:::b/k"])
        )
    function = lambda_.Function(
        stack,
        "Function",
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
        role=role,
    )
    if apply:
        depend_on_policy_only(function, role)
    template = Template.from_stack(stack)
    functions = template.find_resources("AWS::Lambda::Function")
    assert len(functions) == 1
    return next(iter(functions.values())), template


def _policy_id(template: Template) -> str:
    policies = template.find_resources("AWS::IAM::Policy")
    assert len(policies) == 1
    return next(iter(policies))


def test_the_function_waits_for_its_roles_policy_and_nothing_else() -> None:
    function, template = _function_with_role(granted=True, apply=True)
    assert function["DependsOn"] == [_policy_id(template)]


def test_without_it_cdk_makes_the_function_depend_on_the_role_too() -> None:
    function, template = _function_with_role(granted=True, apply=False)
    assert _policy_id(template) in function["DependsOn"]
    assert len(function["DependsOn"]) == 2


def test_a_role_without_grants_leaves_the_function_as_cdk_made_it() -> None:
    applied, _ = _function_with_role(granted=False, apply=True)
    untouched, _ = _function_with_role(granted=False, apply=False)
    assert applied == untouched
