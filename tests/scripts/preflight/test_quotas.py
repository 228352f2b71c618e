"""Preflight's quota checks (scripts/preflight/quotas.py): the EC2 On-Demand
vCPUs the cluster's groups need, the VPC and the NAT gateways' Elastic IPs,
each PASS, WARN and FAIL. moto plays EC2 (instances, instance types, VPCs,
addresses) and Service Quotas for the ``vpc`` code; moto has no EC2 quota
codes, so :class:`FakeServiceQuotas` answers those."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from scripts.preflight.quotas import (
    ELASTIC_IPS,
    ON_DEMAND_STANDARD,
    check_eip_quota,
    check_vcpu_quota,
    check_vpc_quota,
    cluster_groups,
    is_standard,
)
from tests.scripts.preflight.fakes import FakeServiceQuotas, config_of

REGION = "eu-west-1"
AMI = "ami-12c6146b"


def _ec2() -> object:
    return boto3.client("ec2", region_name=REGION)


def _vcpus(quota: float, *, applied: bool = True) -> FakeServiceQuotas:
    table = {ON_DEMAND_STANDARD: quota}
    return FakeServiceQuotas(applied=table) if applied else FakeServiceQuotas(defaults=table)


# ------------------------------------------------------------------ vCPUs


@mock_aws
def test_the_example_orders_instance_needs_28_vcpus() -> None:
    """master 1 x m5.xlarge + core 3 x m5.2xlarge (the example's orders/ap-northeast-2)."""
    config = config_of(emr={"core_instance_type": "m5.2xlarge", "core_instance_count": 3})
    groups = cluster_groups(config)
    assert [(g.role, g.count, g.instance_type) for g in groups] == [
        ("master", 1, "m5.xlarge"),
        ("core", 3, "m5.2xlarge"),
    ]
    result = check_vcpu_quota(config, {"ec2": _ec2(), "service-quotas": _vcpus(128)})
    assert result.status == "PASS"
    assert result.detail.startswith(
        "the cluster needs 28 vCPUs (master 1 x m5.xlarge (4) + core 3 x m5.2xlarge (8)); "
        "128 of the 128-vCPU quota L-1216C47A are free"
    )


@mock_aws
def test_room_for_two_clusters_passes() -> None:
    result = check_vcpu_quota(config_of(), {"ec2": _ec2(), "service-quotas": _vcpus(32)})
    assert result.status == "PASS"
    assert "needs 12 vCPUs" in result.detail and "32 of the 32-vCPU quota" in result.detail


@mock_aws
def test_room_for_one_cluster_only_is_a_warning() -> None:
    result = check_vcpu_quota(config_of(), {"ec2": _ec2(), "service-quotas": _vcpus(20)})
    assert result.status == "WARN"
    assert "a deploy that replaces the cluster runs a second one (24 vCPUs in all)" in (
        result.detail
    )
    assert "--quota-code L-1216C47A --desired-value 24 --region eu-west-1" in result.fix


@mock_aws
def test_the_default_quota_of_5_fails_with_the_increase() -> None:
    """No increase applied: GetServiceQuota has none, the AWS default is read."""
    quotas = _vcpus(5, applied=False)
    result = check_vcpu_quota(config_of(), {"ec2": _ec2(), "service-quotas": quotas})
    assert result.status == "FAIL"
    assert "needs 12 vCPUs" in result.detail and "5 of the 5-vCPU quota" in result.detail
    assert "request-service-quota-increase --service-code ec2 --quota-code L-1216C47A" in (
        result.fix
    )
    assert [c[0] for c in quotas.calls] == ["GetServiceQuota", "GetAWSDefaultServiceQuota"]


@mock_aws
def test_running_instances_use_the_room() -> None:
    ec2 = _ec2()
    ec2.run_instances(ImageId=AMI, MinCount=3, MaxCount=3, InstanceType="m5.2xlarge")
    result = check_vcpu_quota(config_of(), {"ec2": ec2, "service-quotas": _vcpus(32)})
    assert result.status == "FAIL"
    assert "8 of the 32-vCPU quota L-1216C47A are free (24 in use" in result.detail
    assert result.fix.startswith("stop On-Demand instances you do not need, or")


@mock_aws
def test_a_master_outside_the_standard_families_is_a_warning() -> None:
    config = config_of(emr={"master_instance_type": "g4dn.xlarge"})
    result = check_vcpu_quota(config, {"ec2": _ec2(), "service-quotas": _vcpus(64)})
    assert result.status == "WARN"
    assert "needs 8 vCPUs (core 2 x m5.xlarge (4))" in result.detail
    assert "master g4dn.xlarge is not a standard family" in result.detail


@pytest.mark.parametrize(
    ("kind", "standard"),
    [("m5.xlarge", True), ("r5.2xlarge", True), ("c5.2xlarge", True), ("g4dn.xlarge", False),
     ("p3.2xlarge", False), ("x2iedn.xlarge", False)],
)  # fmt: skip
def test_which_families_the_quota_counts(kind: str, standard: bool) -> None:
    assert is_standard(kind) is standard


def test_an_unreadable_quota_fails_naming_the_permissions() -> None:
    result = check_vcpu_quota(config_of(), {"ec2": None, "service-quotas": FakeServiceQuotas()})
    assert result.status == "FAIL"
    assert "GetAWSDefaultServiceQuota ec2/L-1216C47A" in result.detail
    assert "servicequotas:GetServiceQuota" in result.fix


# ------------------------------------------------------------------ VPCs (moto's vpc quota: 5)


def _make_vpcs(count: int) -> None:
    ec2 = boto3.client("ec2", region_name=REGION)
    for index in range(count):
        ec2.create_vpc(CidrBlock=f"10.{index + 10}.0.0/16")


def _vpc_clients() -> dict[str, object]:
    return {"ec2": _ec2(), "service-quotas": boto3.client("service-quotas", region_name=REGION)}


@mock_aws
def test_a_created_vpc_with_room_passes() -> None:
    result = check_vpc_quota(config_of(), _vpc_clients())
    assert result.status == "PASS"
    # moto's account has its default VPC.
    assert result.detail == "the stack creates 1 more; 1 of 5 VPCs in use (L-F678F1CE)"


@mock_aws
def test_the_last_vpc_of_the_quota_is_a_warning() -> None:
    _make_vpcs(3)
    result = check_vpc_quota(config_of(), _vpc_clients())
    assert result.status == "WARN"
    assert "4 of 5 VPCs in use" in result.detail and "takes the last one" in result.detail


@mock_aws
def test_no_vpc_left_fails() -> None:
    _make_vpcs(4)
    result = check_vpc_quota(config_of(), _vpc_clients())
    assert result.status == "FAIL"
    assert "5 of 5 VPCs in use" in result.detail
    assert "--service-code vpc --quota-code L-F678F1CE --desired-value 7" in result.fix


def test_an_imported_vpc_needs_no_quota_and_no_call() -> None:
    config = config_of(
        network={
            "vpc_id": "vpc-0123456789abcdef0",
            "private_subnet_ids": ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1",
                                   "subnet-0123456789abcdef2"],
            "availability_zones": ["eu-west-1a", "eu-west-1b", "eu-west-1c"],
        }
    )  # fmt: skip
    assert check_vpc_quota(config, {"ec2": None, "service-quotas": None}).status == "PASS"
    assert check_eip_quota(config, {"ec2": None, "service-quotas": None}).status == "PASS"


# ------------------------------------------------------------------ Elastic IPs (default 5)


def _eip_clients(allocated: int) -> dict[str, object]:
    ec2 = _ec2()
    for _ in range(allocated):
        ec2.allocate_address(Domain="vpc")
    return {"ec2": ec2, "service-quotas": FakeServiceQuotas(defaults={ELASTIC_IPS: 5})}


@mock_aws
def test_the_nat_gateway_eip_with_room_passes() -> None:
    result = check_eip_quota(config_of(), _eip_clients(0))
    assert result.status == "PASS"
    assert result.detail == "the stack creates 1 more; 0 of 5 Elastic IPs in use (L-0263D0A3)"


@mock_aws
def test_the_last_eip_is_a_warning() -> None:
    result = check_eip_quota(config_of(), _eip_clients(4))
    assert result.status == "WARN" and "4 of 5 Elastic IPs in use" in result.detail


@mock_aws
def test_more_nat_gateways_than_free_eips_fails() -> None:
    result = check_eip_quota(config_of(network={"nat_gateways": 2}), _eip_clients(4))
    assert result.status == "FAIL"
    assert result.detail.startswith("the stack creates 2 more; 4 of 5 Elastic IPs in use")
    assert result.fix.startswith(
        "release unused Elastic IPs, or request an increase: aws service-quotas"
    )


@mock_aws
def test_a_type_outside_the_sizing_table_is_asked_of_describe_instance_types() -> None:
    """m6i.large is no core type infra/sizing.py sizes, but a valid master type."""
    ec2 = _ec2()
    config = config_of(emr={"master_instance_type": "m6i.large"})
    result = check_vcpu_quota(config, {"ec2": ec2, "service-quotas": _vcpus(64)})
    assert result.status == "PASS"
    assert "needs 10 vCPUs (master 1 x m6i.large (2) + core 2 x m5.xlarge (4))" in result.detail
