"""infra/constructs/instance.py: the removal policy read from the instance,
and a stack output whose logical ID is its bare name wherever it is declared
(operators and scripts look outputs up by name)."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Template
from constructs import Construct

from infra.constructs.instance import removal_policy, stack_output
from tests.scripts.preflight.fakes import config_of


def test_the_removal_policy_is_retain_unless_the_instance_says_destroy() -> None:
    assert removal_policy(config_of()) == cdk.RemovalPolicy.RETAIN
    assert removal_policy(config_of(removal_policy="DESTROY")) == cdk.RemovalPolicy.DESTROY


def test_an_output_declared_deep_in_a_construct_keeps_its_name() -> None:
    stack = cdk.Stack(cdk.App(), "Bare")
    inner = Construct(Construct(stack, "Outer"), "Inner")
    stack_output(inner, "EmrClusterId", "j-123", description="the cluster")
    outputs: dict[str, Any] = Template.from_stack(stack).to_json()["Outputs"]
    assert outputs == {"EmrClusterId": {"Value": "j-123", "Description": "the cluster"}}
