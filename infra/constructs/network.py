"""The instance's network: an imported VPC (no lookups), one created for it,
or its Region's shared stack's (``network.shared``).

Importing uses ``Vpc.from_vpc_attributes`` with ids from the config instead of
``Vpc.from_lookup`` so ``cdk synth`` needs neither credentials nor a network.
The shared VPC is the shared stack's own ``ec2.Vpc`` object: CDK turns each
id the instance uses (VPC, subnets) into an export of the shared stack and an
``Fn::ImportValue`` here, and makes the instance's stack depend on the shared
one (infra/shared_config.py says what that protects).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol, runtime_checkable

from aws_cdk import Annotations, Aws, Fn, RemovalPolicy, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct, IDependable

from infra.config import InstanceConfig, InstanceConfigError
from infra.config_sections import (
    CREATED_VPC_ZONES,
    NetworkConfig,
    RetentionConfig,
    msk_client_subnets,
)
from infra.constructs.instance import removal_policy
from infra.constructs.logs_key import encrypted_log_group, retention_days
from model.contract import STACK_PREFIX

# AmazonEMRServicePolicy_v2 only acts on VPC resources carrying this tag.
EMR_MANAGED_TAG: Final = ("for-use-with-amazon-emr-managed-policies", "true")


@runtime_checkable
class SharedResources(Protocol):
    """What a Region's shared stack (infra/stacks/shared_stack.py) lends its instances."""

    @property
    def shared_vpc(self) -> ec2.IVpc: ...

    @property
    def shared_cluster_arn(self) -> str: ...


def shared_region_stack(scope: Construct, region: str) -> SharedResources:
    """The shared stack of ``region`` in ``scope``'s app, which the stack of
    ``scope`` then depends on (deployed first, destroyed last). The app
    builds the shared stacks before the instances (infra/stacks/application.py)."""
    stack = Stack.of(scope)
    name = f"{STACK_PREFIX}-shared-{region}"
    app = stack.node.scope
    found = app.node.try_find_child(name) if app is not None else None
    if not isinstance(found, Stack) or not isinstance(found, SharedResources):
        raise InstanceConfigError(f"{stack.stack_name}: uses {name}, which the app does not build")
    stack.add_stack_dependency(
        found, "the instance runs in the shared VPC or on the shared cluster"
    )
    return found


@dataclass(frozen=True)
class NetworkProps:
    config: NetworkConfig
    removal_policy: RemovalPolicy
    retention: RetentionConfig
    # The instance's Region (for ``config.shared``: whose shared stack).
    region: str | None = None

    @classmethod
    def of(cls, instance: InstanceConfig) -> NetworkProps:
        return cls(instance.network, removal_policy(instance), instance.retention, instance.region)


class Network(Construct):
    """Exposes ``vpc``, ``private_subnets`` (EMR runs in the first; a created MSK
    cluster spans ``msk_subnets``, the first 2 or 3) and
    ``egress_ready`` (what must exist before a node in the first private subnet
    can download anything; empty for an imported VPC, whose egress preflight checks)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: NetworkProps) -> None:
        super().__init__(scope, construct_id)
        config = props.config
        self.egress_ready: list[IDependable] = []
        self.vpc: ec2.IVpc
        if config.shared and props.region is not None:
            # Its egress exists before this stack's deploy starts (a stack dependency).
            self.vpc = shared_region_stack(self, props.region).shared_vpc
        elif config.vpc_id is not None:
            self.vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=config.vpc_id,
                availability_zones=list(config.availability_zones),
                private_subnet_ids=list(config.private_subnet_ids),
            )
            # Imported subnets carry no route table id, and CDK warns that
            # reading one returns nothing. Nothing here reads it (the S3
            # gateway endpoint, the one route-table user, is only added to a
            # created VPC), so the warning is acknowledged, not shown per subnet.
            for subnet in self.vpc.private_subnets:
                Annotations.of(subnet).acknowledge_warning(
                    "@aws-cdk/aws-ec2:noSubnetRouteTableId",
                    "an imported VPC's route tables are never read (no endpoint is added to it)",
                )
        else:
            self.flow_log_group = encrypted_log_group(
                self,
                "FlowLogs",
                what="the instance VPC's flow logs",
                retention=retention_days(props.retention.flow_log_days),
                removal_policy=props.removal_policy,
            )
            # Without listed zones: the region's first 3, resolved at deploy time
            # (``Fn::GetAZs``), so the default 3-broker MSK cluster gets one zone per
            # broker offline, with no account lookup. preflight checks the region has 3.
            zones = list(config.availability_zones) or [
                Fn.select(index, Fn.get_azs()) for index in range(CREATED_VPC_ZONES)
            ]
            self.vpc = ec2.Vpc(
                self,
                "Vpc",
                ip_addresses=ec2.IpAddresses.cidr(config.vpc_cidr),
                availability_zones=zones,
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
                flow_logs={
                    "All": ec2.FlowLogOptions(
                        destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                            self.flow_log_group, self._flow_log_role()
                        ),
                        traffic_type=ec2.FlowLogTrafficType.ALL,
                    )
                },
                restrict_default_security_group=False,
            )
            # EMR reads its software and writes logs through S3: keep it off the NAT.
            # (Same construct id as the former ``gateway_endpoints={"S3": ...}``.)
            self.s3_endpoint = self.vpc.add_gateway_endpoint(
                "S3", service=ec2.GatewayVpcEndpointAwsService.S3
            )
            Tags.of(self.vpc).add(*EMR_MANAGED_TAG)
            # Bootstrap actions download the job's packages and jars at first boot:
            # the first private subnet's NAT route and the S3 endpoint must exist
            # before the cluster does (docs/deploy.md, "First deploy").
            self.egress_ready = [
                self.vpc.private_subnets[0].internet_connectivity_established,
                self.s3_endpoint,
            ]
        self.private_subnets: list[ec2.ISubnet] = list(self.vpc.private_subnets)
        self.msk_subnets = tuple(self.private_subnets[: msk_client_subnets(config)])

    def _flow_log_role(self) -> iam.Role:
        """The role VPC Flow Logs delivers with, assumable by the service for
        this account's flow logs only (aws:SourceAccount, aws:SourceArn: the
        confused-deputy guard of
        https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html).
        CDK grants it writing to the flow-log group."""
        return iam.Role(
            self,
            "FlowLogRole",
            assumed_by=iam.ServicePrincipal(
                "vpc-flow-logs.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {
                        "aws:SourceArn": (
                            f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{Aws.ACCOUNT_ID}:vpc-flow-log/*"
                        )
                    },
                },
            ),
            description="VPC Flow Logs delivery into the instance's encrypted flow-log group",
        )
