"""The instance's network: an imported VPC (no lookups) or one created for it.

Importing uses ``Vpc.from_vpc_attributes`` with ids from the config instead of
``Vpc.from_lookup`` so ``cdk synth`` needs neither credentials nor a network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import RemovalPolicy, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import NetworkConfig

# AmazonEMRServicePolicy_v2 only acts on VPC resources carrying this tag.
EMR_MANAGED_TAG: Final = ("for-use-with-amazon-emr-managed-policies", "true")


@dataclass(frozen=True)
class NetworkProps:
    config: NetworkConfig
    removal_policy: RemovalPolicy


class Network(Construct):
    """Exposes ``vpc`` and ``private_subnets`` (EMR and MSK run only there)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: NetworkProps) -> None:
        super().__init__(scope, construct_id)
        config = props.config
        if config.vpc_id is not None:
            self.vpc: ec2.IVpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=config.vpc_id,
                availability_zones=list(config.availability_zones),
                private_subnet_ids=list(config.private_subnet_ids),
            )
        else:
            self.flow_log_group = logs.LogGroup(
                self,
                "FlowLogs",
                retention=logs.RetentionDays.THREE_MONTHS,
                removal_policy=props.removal_policy,
            )
            zones = list(config.availability_zones)
            self.vpc = ec2.Vpc(
                self,
                "Vpc",
                ip_addresses=ec2.IpAddresses.cidr(config.vpc_cidr),
                max_azs=None if zones else 2,
                availability_zones=zones or None,
                nat_gateways=config.nat_gateways,
                subnet_configuration=[
                    ec2.SubnetConfiguration(
                        name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                    ),
                    ec2.SubnetConfiguration(
                        name="Private",
                        subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                        cidr_mask=20,
                    ),
                ],
                # EMR reads its software and writes logs through S3: keep it off the NAT.
                gateway_endpoints={
                    "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)
                },
                flow_logs={
                    "All": ec2.FlowLogOptions(
                        destination=ec2.FlowLogDestination.to_cloud_watch_logs(self.flow_log_group),
                        traffic_type=ec2.FlowLogTrafficType.ALL,
                    )
                },
                restrict_default_security_group=False,
            )
            Tags.of(self.vpc).add(*EMR_MANAGED_TAG)
        self.private_subnets: list[ec2.ISubnet] = list(self.vpc.private_subnets)
