"""The network a first deploy needs: a created VPC's availability zones, or
an imported VPC's egress (a NAT gateway or the endpoints the job and nodes call)."""

from __future__ import annotations

from typing import Any, Final

from infra.config import InstanceConfig
from infra.config_sections import CREATED_VPC_ZONES
from scripts.preflight.result import Clients, Result, error_text, iam_fix

# Interface endpoint services an imported VPC needs without a NAT (S3 may be a
# gateway endpoint): the job's and the nodes' AWS calls.
ENDPOINT_SERVICES: Final = ("s3", "kinesis-streams", "glue", "monitoring", "sts")


def check_network(config: InstanceConfig, clients: Clients) -> Result:
    """The zones of a created VPC, or the egress of an imported one."""
    if config.network.vpc_id is None:
        return _zones(config, clients["ec2"])
    return _egress(config, clients["ec2"], config.network.vpc_id)


def _zones(config: InstanceConfig, ec2: Any) -> Result:
    network = config.network
    name = "availability zones"
    wanted = len(network.availability_zones) or CREATED_VPC_ZONES
    try:
        zones = ec2.describe_availability_zones(
            Filters=[{"Name": "state", "Values": ["available"]}]
        )["AvailabilityZones"]
    except Exception as exc:
        return Result(
            name,
            False,
            f"DescribeAvailabilityZones failed: {error_text(exc)}",
            iam_fix("ec2:DescribeAvailabilityZones"),
        )
    names = {zone["ZoneName"] for zone in zones}
    missing = sorted(set(network.availability_zones) - names)
    if missing or len(names) < wanted:
        return Result(
            name,
            False,
            f"the created VPC needs {wanted} zones; {config.region} has {sorted(names)}"
            + (f", not {missing}" if missing else ""),
            "list existing zones in network.availability_zones, or lower kafka.broker_count "
            "to a multiple of the zones there are",
        )
    return Result(name, True, f"{config.region} has {len(names)} zones (the VPC spans {wanted})")


def _egress(config: InstanceConfig, ec2: Any, vpc_id: str) -> Result:
    name = "imported VPC egress"
    try:
        nats = ec2.describe_nat_gateways(
            Filters=[
                {"Name": "vpc-id", "Values": [vpc_id]},
                {"Name": "state", "Values": ["available"]},
            ]
        )["NatGateways"]
        endpoints = ec2.describe_vpc_endpoints(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])[
            "VpcEndpoints"
        ]
    except Exception as exc:
        return Result(
            name,
            False,
            f"describe calls failed: {error_text(exc)}",
            iam_fix("ec2:DescribeNatGateways, ec2:DescribeVpcEndpoints"),
        )
    if nats:
        return Result(name, True, f"{vpc_id} has a NAT gateway ({nats[0]['NatGatewayId']})")
    have = {e["ServiceName"].rsplit(".", 1)[-1] for e in endpoints}
    missing = [service for service in ENDPOINT_SERVICES if service not in have]
    if not missing:
        return Result(name, True, f"{vpc_id} has endpoints for {', '.join(ENDPOINT_SERVICES)}")
    return Result(
        name,
        False,
        f"{vpc_id} has no NAT gateway and no endpoint for {', '.join(missing)}",
        "add a NAT gateway to the private subnets' route, or VPC endpoints for "
        + ", ".join(f"com.amazonaws.{config.region}.{s}" for s in missing),
    )
