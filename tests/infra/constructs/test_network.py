"""infra/constructs/network.py alone in a bare stack: an imported VPC is built
from the config's ids with no lookup and no egress to wait for; a created VPC
gets its flow logs, the S3 gateway endpoint and the EMR tag, and the cluster
waits for its egress; a shared VPC needs the Region's shared stack in the app."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from infra.config import InstanceConfigError
from infra.config_sections import NetworkConfig, RetentionConfig
from infra.constructs.network import EMR_MANAGED_TAG, Network, NetworkProps

IMPORTED = NetworkConfig(
    vpc_id="vpc-0123456789abcdef0",
    availability_zones=("eu-west-1a", "eu-west-1b"),
    private_subnet_ids=("subnet-0123456789abcdef0", "subnet-0123456789abcdef1"),
)


def _network(config: NetworkConfig, region: str | None = None) -> tuple[Network, dict[str, Any]]:
    stack = cdk.Stack(cdk.App(), "Bare", env=cdk.Environment(region="eu-west-1"))
    props = NetworkProps(config, cdk.RemovalPolicy.RETAIN, RetentionConfig(), region)
    network = Network(stack, "Network", props=props)
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return network, template


def _of_type(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in template.get("Resources", {}).values() if r["Type"] == kind]


def test_an_imported_vpc_uses_the_configured_ids_and_creates_nothing() -> None:
    network, template = _network(IMPORTED)
    assert template.get("Resources", {}) == {}
    assert network.vpc.vpc_id == IMPORTED.vpc_id
    assert [s.subnet_id for s in network.private_subnets] == list(IMPORTED.private_subnet_ids)
    assert len(network.msk_subnets) == 2 and network.egress_ready == []


def test_a_created_vpc_logs_its_flows_keeps_s3_off_the_nat_and_carries_the_emr_tag() -> None:
    network, template = _network(NetworkConfig(vpc_cidr="10.1.0.0/16", nat_gateways=1))
    (vpc,) = _of_type(template, "AWS::EC2::VPC")
    assert vpc["Properties"]["CidrBlock"] == "10.1.0.0/16"
    key, value = EMR_MANAGED_TAG
    assert {"Key": key, "Value": value} in vpc["Properties"]["Tags"]
    (flow_log,) = _of_type(template, "AWS::EC2::FlowLog")
    assert flow_log["Properties"]["TrafficType"] == "ALL"
    (endpoint,) = _of_type(template, "AWS::EC2::VPCEndpoint")
    assert endpoint["Properties"]["VpcEndpointType"] == "Gateway"
    assert len(_of_type(template, "AWS::EC2::NatGateway")) == 1
    # The region's first 3 zones: 3 private subnets, an MSK subnet in each.
    assert len(network.private_subnets) == 3 and len(network.msk_subnets) == 3
    # The cluster waits for the first private subnet's NAT route and the endpoint.
    assert len(network.egress_ready) == 2 and network.egress_ready[1] is network.s3_endpoint


def test_the_flow_log_role_serves_this_accounts_flow_logs_only() -> None:
    _, template = _network(NetworkConfig())
    (role,) = [
        r
        for r in _of_type(template, "AWS::IAM::Role")
        if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "vpc-flow-logs.amazonaws.com"}
    ]
    condition = role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Condition"]
    assert set(condition) == {"StringEquals", "ArnLike"}
    assert "aws:SourceAccount" in condition["StringEquals"]


def test_a_shared_vpc_without_the_shared_stack_in_the_app_is_refused() -> None:
    with pytest.raises(InstanceConfigError, match="Streaming-shared-eu-west-1, which the app"):
        _network(NetworkConfig(shared=True), region="eu-west-1")
