"""Preflight's CDK bootstrap check (scripts/preflight/bootstrap.py) against
moto's SSM: no version parameter, an old one, one below the lookup role's
and a current one; a qualifier from cdk.json; a refused read."""

from __future__ import annotations

import boto3
from moto import mock_aws

from scripts.preflight.bootstrap import (
    DEFAULT_QUALIFIER,
    bootstrap_check,
    check_cdk_bootstrap,
    qualifier,
)
from tests.scripts.preflight.fakes import Answers, client_error, config_of

PARAMETER = "/cdk-bootstrap/hnb659fds/version"


def _ssm_with(version: str | None, name: str = PARAMETER) -> object:
    ssm = boto3.client("ssm", region_name="eu-west-1")
    if version is not None:
        ssm.put_parameter(Name=name, Value=version, Type="String")
    return ssm


@mock_aws
def test_an_unbootstrapped_region_fails_with_the_command() -> None:
    config = config_of(account="123456789012")
    result = check_cdk_bootstrap(config, {"ssm": _ssm_with(None)})
    assert result.status == "FAIL"
    assert f"eu-west-1 is not bootstrapped for the CDK: no SSM parameter {PARAMETER}" in (
        result.detail
    )
    assert result.fix == (
        "bootstrap each target region once: npx cdk bootstrap aws://123456789012/eu-west-1"
    )


@mock_aws
def test_a_bootstrap_older_than_the_templates_need_fails() -> None:
    result = check_cdk_bootstrap(config_of(), {"ssm": _ssm_with("5")})
    assert result.status == "FAIL"
    assert "version 5" in result.detail and "need version 6 or later" in result.detail
    assert "npx cdk bootstrap aws://<account>/eu-west-1" in result.fix


@mock_aws
def test_a_bootstrap_below_the_lookup_role_version_is_a_warning() -> None:
    result = check_cdk_bootstrap(config_of(), {"ssm": _ssm_with("7")})
    assert result.status == "WARN"
    assert "lookup role needs version 8" in result.detail


@mock_aws
def test_a_current_bootstrap_passes() -> None:
    result = check_cdk_bootstrap(config_of(), {"ssm": _ssm_with("30")})
    assert result.status == "PASS"
    assert result.detail == "eu-west-1 is bootstrapped (version 30, qualifier hnb659fds)"


@mock_aws
def test_the_qualifier_comes_from_cdk_json() -> None:
    custom = qualifier({"@aws-cdk/core:bootstrapQualifier": "team1"})
    assert custom == "team1"
    assert qualifier({}) == DEFAULT_QUALIFIER
    ssm = _ssm_with("30", "/cdk-bootstrap/team1/version")
    assert bootstrap_check(custom)(config_of(), {"ssm": ssm}).status == "PASS"
    missing = bootstrap_check("team2")(config_of(), {"ssm": ssm})
    assert missing.status == "FAIL" and missing.fix.endswith("--qualifier team2")
    assert "/cdk-bootstrap/team2/version" in missing.detail


def test_a_refused_read_names_the_permission() -> None:
    ssm = Answers(get_parameter=client_error("AccessDeniedException", "GetParameter"))
    result = check_cdk_bootstrap(config_of(), {"ssm": ssm})
    assert result.status == "FAIL"
    assert "access denied" in result.detail
    assert f"ssm:GetParameter on {PARAMETER}" in result.fix
