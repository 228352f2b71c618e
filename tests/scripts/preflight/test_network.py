"""scripts.preflight.network: an imported VPC's egress and a created VPC's
zones (in-process moto)."""

from __future__ import annotations

import boto3
from moto import mock_aws

from scripts.preflight import network
from tests.scripts.preflight.stubs import _config

# ------------------------------------------------------------------ moto in process


@mock_aws
def test_imported_vpc_needs_nat_or_the_endpoints() -> None:
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.1.{i}.0/24", AvailabilityZone=f"eu-west-1{z}")[
            "Subnet"
        ]["SubnetId"]
        for i, z in enumerate("abc")
    ]
    config = _config(
        network={
            "vpc_id": vpc,
            "private_subnet_ids": subnets,
            "availability_zones": ["eu-west-1a", "eu-west-1b", "eu-west-1c"],
        }
    )
    result = network.check_network(config, {"ec2": ec2})
    assert not result.ok
    assert (
        "no NAT gateway and no endpoint for s3, kinesis-streams, glue, monitoring, sts"
        in result.detail
    )
    assert "com.amazonaws.eu-west-1.kinesis-streams" in result.fix
    for service in network.ENDPOINT_SERVICES:
        ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.eu-west-1.{service}")
    assert network.check_network(config, {"ec2": ec2}).ok


@mock_aws
def test_created_vpc_zones_must_exist() -> None:
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    assert network.check_network(_config(), {"ec2": ec2}).ok
    bad = _config(network={"availability_zones": ["eu-west-1a", "eu-west-1b", "eu-west-1z"]})
    result = network.check_network(bad, {"ec2": ec2})
    assert not result.ok and "not ['eu-west-1z']" in result.detail
