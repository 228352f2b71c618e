"""Builds the CDK app: one :class:`StreamingStack` per declared instance, with
cdk-nag's AwsSolutionsChecks attached so a finding fails every synth (the CLI's
and the tests'), not only a dedicated check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import (
    CONTEXT_KEY,
    SYNTH_CHECK_CONTEXT_KEY,
    InstanceConfig,
    InstanceConfigError,
    load_instances,
)
from infra.shared_config import PLACEHOLDER_CLUSTER_MARK, load_shared
from infra.stacks.shared_stack import SharedRegionStack
from infra.stacks.streaming_stack import StreamingStack


def build_app(
    context: Mapping[str, Any] | None = None, outdir: str | None = None
) -> tuple[cdk.App, list[StreamingStack]]:
    """``context`` replaces cdk.json's context (tests pass the shipped example);
    without it the CLI-provided context is used. The region shared stacks
    (``streaming.shared``) are built too; the instances' stacks are returned."""
    app = cdk.App(context=dict(context) if context is not None else None, outdir=outdir)
    instances = load_instances({CONTEXT_KEY: app.node.try_get_context(CONTEXT_KEY)})
    # ``-c key=true`` on the CLI arrives as a string, the tests pass a bool.
    if str(app.node.try_get_context(SYNTH_CHECK_CONTEXT_KEY)).lower() != "true":
        refuse_placeholders(instances)
    stacks = [add_instance(app, config) for config in instances]
    for shared in load_shared({CONTEXT_KEY: app.node.try_get_context(CONTEXT_KEY)}):
        env = cdk.Environment(account=shared.account, region=shared.region)
        SharedRegionStack(app, shared.stack_name, config=shared, env=env)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stacks


def add_instance(app: cdk.App, config: InstanceConfig) -> StreamingStack:
    """Region explicit; account from config or left to deploy time. Nothing is
    looked up, so synth runs offline without credentials."""
    env = cdk.Environment(account=config.account, region=config.region)
    return StreamingStack(app, config.stack_name, config=config, env=env)


def refuse_placeholders(instances: list[InstanceConfig]) -> None:
    """A synth that may be deployed must not carry the example's TLS zip (EMR
    would fail to create the cluster minutes into the deploy) or its shared
    cluster ARN (the topic would fail). ``make synth`` and
    the tests check the shipped example with ``-c streaming:synth-check=true``."""
    lines = [
        f"instance {config.instance_id}: field emr.tls_certificates_s3_uri: "
        f"still the example placeholder {config.emr.tls_certificates_s3_uri!r}; "
        f"allowed: the zip `make certs INSTANCE={config.instance_id}` uploads "
        "(docs/deploy.md, First deploy)"
        for config in instances
        if config.emr.tls_is_placeholder
    ]
    # The example's shared cluster (and the VPC beside it) names no real one.
    lines += [
        f"instance {config.instance_id}: field kafka.cluster_arn: still the example "
        f"placeholder {config.kafka.cluster_arn!r}; allowed: the MskClusterArn output of "
        f'Streaming-shared-{config.region} (docs/infra.md, "A region\'s shared stack")'
        for config in instances
        if PLACEHOLDER_CLUSTER_MARK in (config.kafka.cluster_arn or "")
    ]
    if lines:
        raise InstanceConfigError("\n".join(lines))
