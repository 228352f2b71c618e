"""Builds the CDK app: one :class:`StreamingStack` per declared instance and
one :class:`SharedRegionStack` per ``streaming.shared`` Region, with cdk-nag's
AwsSolutionsChecks attached so a finding fails every synth (the CLI's and the
tests'), not only a dedicated check.

Which stacks: the CDK CLI does not tell the app which stacks it selected
(``cdk deploy Streaming-orders-eu-west-1`` runs the same ``python3 app.py``
as ``cdk deploy --all``), so the app cannot refuse the example's placeholders
of only the stacks being deployed by reading the CLI's arguments. The
selection is a context key instead, ``-c streaming:instances=orders-eu-west-1``
(comma-separated instance ids, or ``shared-<region>`` for a shared stack
alone): the app then builds only those instances and the shared stacks they
use, and refuses placeholders in those only. Without it every declared stack
is built and every instance's placeholders are refused (``make synth`` passes
``streaming:synth-check`` and refuses none). A shared stack is a dependency
of the instances that use it (``add_dependency``), so ``cdk deploy`` deploys
it first, whichever way the stacks were selected (docs/deploy.md, "First deploy").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import (
    CONTEXT_KEY,
    SELECTION_CONTEXT_KEY,
    SYNTH_CHECK_CONTEXT_KEY,
    InstanceConfig,
    InstanceConfigError,
    load_instances,
    runs_an_emr_cluster,
)
from infra.shared_config import (
    SharedRegionConfig,
    check_shared_users,
    load_shared,
    uses_shared,
)
from infra.stacks.shared_stack import SharedRegionStack
from infra.stacks.streaming_stack import StreamingStack

SHARED_SELECTOR_PREFIX = "shared-"


def build_app(
    context: Mapping[str, Any] | None = None, outdir: str | None = None
) -> tuple[cdk.App, list[StreamingStack]]:
    """``context`` replaces cdk.json's context (tests pass the shipped example);
    without it the CLI-provided context is used. The selected instances'
    stacks are returned; the shared stacks they use are built too (all of
    them without a selection)."""
    app = cdk.App(context=dict(context) if context is not None else None, outdir=outdir)
    section = {CONTEXT_KEY: app.node.try_get_context(CONTEXT_KEY)}
    instances = load_instances(section)
    shared = load_shared(section)
    check_shared_users(instances, shared)
    instances, shared = select(instances, shared, app.node.try_get_context(SELECTION_CONTEXT_KEY))
    # ``-c key=true`` on the CLI arrives as a string, the tests pass a bool.
    if str(app.node.try_get_context(SYNTH_CHECK_CONTEXT_KEY)).lower() != "true":
        refuse_placeholders(instances)
    # Shared stacks first: an instance that uses one finds it in the app
    # (infra/constructs/network.py, shared_region_stack) and depends on it.
    for config in shared:
        add_shared(app, config)
    stacks = [add_instance(app, config) for config in instances]
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return app, stacks


def select(
    instances: list[InstanceConfig], shared: list[SharedRegionConfig], selection: Any
) -> tuple[list[InstanceConfig], list[SharedRegionConfig]]:
    """The instances ``selection`` names (``streaming:instances``: ids separated
    by commas, or a list) and the shared stacks they use or it names
    (``shared-<region>``), in cdk.json's order; everything when it is absent.
    An unknown name is refused with the names there are."""
    if selection is None:
        return instances, shared
    names = selection if isinstance(selection, list) else str(selection).split(",")
    wanted = [str(name).strip() for name in names if str(name).strip()]
    known = [c.instance_id for c in instances] + [SHARED_SELECTOR_PREFIX + s.region for s in shared]
    unknown = [name for name in wanted if name not in known]
    if unknown or not wanted:
        raise InstanceConfigError(
            f"context {SELECTION_CONTEXT_KEY}: bad value {selection!r}; allowed: "
            f"instance ids or shared-<region>, separated by commas: {', '.join(known)}"
        )
    chosen = [c for c in instances if c.instance_id in wanted]
    regions = {c.region for c in chosen if uses_shared(c)}
    regions |= {name.removeprefix(SHARED_SELECTOR_PREFIX) for name in wanted} & {
        s.region for s in shared
    }
    return chosen, [s for s in shared if s.region in regions]


def add_shared(app: cdk.App, config: SharedRegionConfig) -> SharedRegionStack:
    env = cdk.Environment(account=config.account, region=config.region)
    return SharedRegionStack(app, config.stack_name, config=config, env=env)


def add_instance(app: cdk.App, config: InstanceConfig) -> StreamingStack:
    """Region explicit; account from config or left to deploy time. Nothing is
    looked up, so synth runs offline without credentials. An instance that
    uses its Region's shared stack needs it added to ``app`` first."""
    env = cdk.Environment(account=config.account, region=config.region)
    return StreamingStack(app, config.stack_name, config=config, env=env)


def refuse_placeholders(instances: list[InstanceConfig]) -> None:
    """A synth that may be deployed must not carry the example's TLS zip (EMR
    would fail to create the cluster minutes into the deploy). ``make synth``
    and the tests check the shipped example with ``-c streaming:synth-check=true``;
    ``-c streaming:instances=...`` limits ``instances`` to the selected ones."""
    lines = [
        f"instance {config.instance_id}: field emr.tls_certificates_s3_uri: "
        f"still the example placeholder {config.emr.tls_certificates_s3_uri!r}; "
        f"allowed: the zip `make certs INSTANCE={config.instance_id}` uploads "
        "(docs/deploy.md, First deploy)"
        for config in instances
        if runs_an_emr_cluster(config) and config.emr.tls_is_placeholder
    ]
    if lines:
        raise InstanceConfigError("\n".join(lines))
