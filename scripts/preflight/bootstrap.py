"""Preflight: the instance's account and region are bootstrapped for the CDK.

Every environment (account and region) a stack deploys to needs its own
bootstrap stack, ``CDKToolkit`` by default, created by ``cdk bootstrap``
(https://docs.aws.amazon.com/cdk/v2/guide/bootstrapping.html,
https://docs.aws.amazon.com/cdk/v2/guide/bootstrapping-env.html). The stack
records its template version in the SSM parameter
``/cdk-bootstrap/<qualifier>/version``; the qualifier is ``hnb659fds`` unless
cdk.json sets ``@aws-cdk/core:bootstrapQualifier``
(https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.DefaultStackSynthesizer.html).
Each synthesized template reads that parameter (its ``BootstrapVersion``
parameter) and its ``CheckBootstrapVersion`` rule refuses versions 1 to 5
("CDK bootstrap stack version 6 required"); the cloud assembly asks version 8
of the lookup role ``cdk diff`` uses. So: no parameter is a FAIL (the deploy
stops at its first step), below 6 a FAIL, below 8 a WARN.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from infra.config import InstanceConfig
from scripts.preflight.result import Clients, Result, access_denied, error_code, error_text, iam_fix

DEFAULT_QUALIFIER: Final = "hnb659fds"
QUALIFIER_CONTEXT_KEY: Final = "@aws-cdk/core:bootstrapQualifier"
# What the synthesized templates' CheckBootstrapVersion rule and the assembly's
# lookup role require (aws-cdk-lib's DefaultStackSynthesizer; seen in the
# templates of this app: the rule's "CDK bootstrap stack version 6 required").
MIN_DEPLOY_VERSION: Final = 6
LOOKUP_ROLE_VERSION: Final = 8
NAME: Final = "CDK bootstrap"


def qualifier(context: Mapping[str, Any]) -> str:
    """The bootstrap qualifier the app's stacks use (cdk.json context)."""
    value = context.get(QUALIFIER_CONTEXT_KEY)
    return value if isinstance(value, str) and value else DEFAULT_QUALIFIER


def version_parameter(qualifier_: str) -> str:
    return f"/cdk-bootstrap/{qualifier_}/version"


def bootstrap_command(config: InstanceConfig, qualifier_: str) -> str:
    account = config.account or "<account>"
    extra = "" if qualifier_ == DEFAULT_QUALIFIER else f" --qualifier {qualifier_}"
    return f"npx cdk bootstrap aws://{account}/{config.region}{extra}"


def judge(version: int, config: InstanceConfig, qualifier_: str) -> Result:
    """PASS, WARN or FAIL for a bootstrap stack of ``version``. Pure."""
    where = f"{config.region} is bootstrapped (version {version}, qualifier {qualifier_})"
    command = bootstrap_command(config, qualifier_)
    if version < MIN_DEPLOY_VERSION:
        return Result(
            NAME,
            False,
            f"{where}; the stack templates need version {MIN_DEPLOY_VERSION} or later",
            f"upgrade the bootstrap stack: {command}",
        )
    if version < LOOKUP_ROLE_VERSION:
        return Result(
            NAME,
            True,
            f"{where}; deploys work, but cdk diff's lookup role needs version "
            f"{LOOKUP_ROLE_VERSION}",
            f"upgrade when convenient: {command}",
            warn=True,
        )
    return Result(NAME, True, where)


def check_cdk_bootstrap(
    config: InstanceConfig, clients: Clients, qualifier_: str = DEFAULT_QUALIFIER
) -> Result:
    parameter = version_parameter(qualifier_)
    command = bootstrap_command(config, qualifier_)
    ssm = clients["ssm"]
    try:
        value = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    except Exception as exc:
        if error_code(exc) == "ParameterNotFound":
            return Result(
                NAME,
                False,
                f"{config.region} is not bootstrapped for the CDK: no SSM parameter {parameter} "
                "(the CDKToolkit stack writes it); cdk deploy would stop before any resource",
                f"bootstrap each target region once: {command}",
            )
        fix = iam_fix(f"ssm:GetParameter on {parameter}")
        if access_denied(exc):
            return Result(NAME, False, f"GetParameter {parameter} was refused (access denied)", fix)
        return Result(NAME, False, f"GetParameter {parameter} failed: {error_text(exc)}", fix)
    try:
        version = int(str(value))
    except ValueError:
        return Result(
            NAME,
            False,
            f"{parameter} holds {value!r}, not a version number",
            f"re-create the bootstrap stack: {command}",
        )
    return judge(version, config, qualifier_)


def bootstrap_check(qualifier_: str) -> Callable[[InstanceConfig, Clients], Result]:
    """The check for the app's qualifier, shaped like every other check."""

    def check(config: InstanceConfig, clients: Clients) -> Result:
        return check_cdk_bootstrap(config, clients, qualifier_)

    check.__name__ = "check_cdk_bootstrap"
    return check
