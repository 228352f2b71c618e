"""Builds the CDK app: one :class:`StreamingStack` per declared instance, with
cdk-nag's AwsSolutionsChecks attached so a finding fails every synth (the CLI's
and the tests'), not only a dedicated check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import CONTEXT_KEY, InstanceConfig, load_instances
from infra.stacks.streaming_stack import StreamingStack


def build_app(
    context: Mapping[str, Any] | None = None, outdir: str | None = None
) -> tuple[cdk.App, list[StreamingStack]]:
    """``context`` replaces cdk.json's context (tests pass the shipped example);
    without it the CLI-provided context is used."""
    app = cdk.App(context=dict(context) if context is not None else None, outdir=outdir)
    instances = load_instances({CONTEXT_KEY: app.node.try_get_context(CONTEXT_KEY)})
    stacks = [add_instance(app, config) for config in instances]
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stacks


def add_instance(app: cdk.App, config: InstanceConfig) -> StreamingStack:
    """Region explicit; account from config or left to deploy time. Nothing is
    looked up, so synth runs offline without credentials."""
    env = cdk.Environment(account=config.account, region=config.region)
    return StreamingStack(app, config.stack_name, config=config, env=env)
