"""Preflight of a serverless instance (scripts/preflight/serverless.py): the
EMR Serverless concurrent-vCPU quota and the release in the region, each
PASS, WARN and FAIL; an EMR instance is not asked. moto plays EMR
Serverless (applications) and EMR (release labels); moto's Service Quotas has
no ``emr-serverless`` code, so :class:`FakeServiceQuotas` answers it."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from scripts.preflight.checks import CHECKS
from scripts.preflight.quotas import check_vcpu_quota
from scripts.preflight.serverless import (
    SERVERLESS_VCPUS,
    check_serverless_release,
    check_serverless_vcpu_quota,
)
from scripts.preflight.tls import check_tls_object
from tests.scripts.preflight.fakes import Answers, FakeServiceQuotas, config_of

REGION = "eu-west-1"


def _clients(quota: float, *apps_vcpu: int) -> dict[str, Any]:
    emr = boto3.client("emr-serverless", region_name=REGION)
    for index, vcpu in enumerate(apps_vcpu):
        emr.create_application(
            name=f"other-{index}",
            releaseLabel="emr-7.1.0",  # moto accepts emr-X.Y.0 labels only
            type="SPARK",
            maximumCapacity={"cpu": f"{vcpu} vCPU", "memory": f"{2 * vcpu} GB"},
        )
    return {
        "emr-serverless": emr,
        "service-quotas": FakeServiceQuotas(applied={SERVERLESS_VCPUS: quota}),
    }


def test_both_checks_are_registered() -> None:
    assert check_serverless_vcpu_quota in CHECKS
    assert check_serverless_release in CHECKS


@mock_aws
def test_an_emr_instance_is_not_asked() -> None:
    config = config_of()
    for check in (check_serverless_vcpu_quota, check_serverless_release):
        result = check(config, {})
        assert result.status == "PASS" and result.detail.endswith('"compute": "emr": n/a')


@mock_aws
def test_room_for_the_job_beside_the_other_applications_passes() -> None:
    result = check_serverless_vcpu_quota(config_of(compute="serverless"), _clients(16, 4))
    assert result.status == "PASS"
    assert result.detail == (
        "the job needs 2 vCPUs (a driver and 1 executor(s)); the quota L-D05C8A75 is 16; "
        "the region's other applications may take up to 4"
    )


@mock_aws
def test_other_applications_that_could_fill_the_quota_warn() -> None:
    result = check_serverless_vcpu_quota(config_of(compute="serverless"), _clients(16, 8, 8))
    assert result.status == "WARN"
    assert "--quota-code L-D05C8A75 --desired-value 18" in result.fix


@mock_aws
def test_a_quota_below_the_jobs_need_fails() -> None:
    config = config_of(
        compute="serverless",
        serverless={"driver": {"cpu": 2, "memory_gb": 4}, "executor_count": 2},
    )
    result = check_serverless_vcpu_quota(config, _clients(3))
    assert result.status == "FAIL"
    assert "needs 4 vCPUs" in result.detail


@mock_aws
def test_an_unreadable_quota_names_the_permissions() -> None:
    clients = {**_clients(16), "service-quotas": FakeServiceQuotas()}
    result = check_serverless_vcpu_quota(config_of(compute="serverless"), clients)
    assert result.status == "FAIL"
    assert "servicequotas:GetAWSDefaultServiceQuota" in result.fix


@pytest.mark.parametrize(
    ("regions", "labels", "status", "words"),
    [
        ((REGION,), ["emr-spark-8.1.0"], "PASS", "EMR Serverless and emr-spark-8.1.0 are offered"),
        ((REGION,), ["emr-7.12.0"], "FAIL", "emr-spark-8.1.0 is not offered in eu-west-1"),
        (("us-east-1",), ["emr-spark-8.1.0"], "FAIL", "EMR Serverless is not offered"),
    ],
)
def test_the_release_must_be_offered_in_the_region(
    regions: tuple[str, ...], labels: list[str], status: str, words: str
) -> None:
    emr = Answers(list_release_labels={"ReleaseLabels": labels})
    result = check_serverless_release(config_of(compute="serverless"), {"emr": emr}, regions)
    assert result.status == status
    assert words in result.detail


def test_the_endpoint_table_lists_the_examples_regions() -> None:
    """Without an explicit list the check asks botocore's endpoint table."""
    emr = Answers(list_release_labels={"ReleaseLabels": ["emr-spark-8.1.0"]})
    for region in ("eu-west-1", "ap-northeast-2", "us-east-1"):
        config = config_of(compute="serverless").model_copy(update={"region": region})
        assert check_serverless_release(config, {"emr": emr}).status == "PASS", region


def test_the_emr_only_checks_do_not_apply_to_a_serverless_instance() -> None:
    """No cluster: no TLS zip to find, no EC2 vCPUs to count (a placeholder
    or missing zip would otherwise fail the run)."""

    config = config_of(compute="serverless")
    for check in (check_tls_object, check_vcpu_quota):
        result = check(config, {})
        assert result.status == "PASS"
        assert result.detail.endswith('"compute": "serverless": n/a')
