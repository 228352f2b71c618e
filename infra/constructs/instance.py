"""What every construct reads from the instance the same way: its removal
policy, and the stack outputs it declares.

An output's logical ID is its name, which operators and scripts look up
(``EmrClusterId``, ``MskClusterArn``, docs/deploy.md); declared inside a
construct, CDK would prefix it with the construct's path and a hash, so the
name is pinned here."""

from __future__ import annotations

from aws_cdk import CfnOutput, RemovalPolicy
from constructs import Construct

from infra.config import InstanceConfig


def removal_policy(instance: InstanceConfig) -> RemovalPolicy:
    """The instance's ``removal_policy`` (RETAIN unless it says DESTROY)."""
    return RemovalPolicy.DESTROY if instance.removal_policy == "DESTROY" else RemovalPolicy.RETAIN


def stack_output(scope: Construct, name: str, value: str, description: str | None = None) -> None:
    """The stack output ``name`` (its logical ID, unique in the stack)."""
    output = CfnOutput(scope, name, value=value, description=description)
    output.override_logical_id(name)
