"""The teardown custom resource's handler against moto EC2: it revokes exactly
the rules by which the EMR-managed groups reference each other, after which
the groups delete (a referenced group fails with DependencyViolation)."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from infra.sg_cleanup.handler import revoke_cross_references


def _groups(ec2: Any) -> tuple[str, str, str, str]:
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    master, core, service, other = (
        ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc)["GroupId"]
        for name in ("master", "core", "service", "unrelated")
    )
    # What EMR adds: the groups admit each other (all TCP), plus one CIDR rule
    # and one rule from an unrelated group, which must stay.
    for group, peers in ((master, (core, service)), (core, (master,)), (service, (master,))):
        for peer in peers:
            ec2.authorize_security_group_ingress(
                GroupId=group,
                IpPermissions=[
                    {
                        "IpProtocol": "tcp",
                        "FromPort": 0,
                        "ToPort": 65535,
                        "UserIdGroupPairs": [{"GroupId": peer}],
                    }
                ],
            )
    ec2.authorize_security_group_ingress(
        GroupId=master,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 8443,
                "ToPort": 8443,
                "IpRanges": [{"CidrIp": "10.0.0.0/8"}],
            },
            {
                "IpProtocol": "tcp",
                "FromPort": 22,
                "ToPort": 22,
                "UserIdGroupPairs": [{"GroupId": other}],
            },
        ],
    )
    return master, core, service, other


@mock_aws
def test_revokes_the_cross_references_and_keeps_other_rules() -> None:
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    master, core, service, other = _groups(ec2)
    ids = [master, core, service]
    assert revoke_cross_references(ec2, ids) == 4

    # DeleteSecurityGroup fails while another group references the group (moto
    # does not enforce it, so the precondition is checked here): none is left.
    for group in ec2.describe_security_groups(GroupIds=ids)["SecurityGroups"]:
        for key in ("IpPermissions", "IpPermissionsEgress"):
            referenced = {p["GroupId"] for r in group[key] for p in r["UserIdGroupPairs"]}
            assert not referenced & set(ids), group["GroupId"]

    (remaining,) = ec2.describe_security_groups(GroupIds=[master])["SecurityGroups"]
    peers = {p["GroupId"] for r in remaining["IpPermissions"] for p in r["UserIdGroupPairs"]}
    assert peers == {other}
    assert any(r.get("IpRanges") for r in remaining["IpPermissions"])
    for group in ids:
        ec2.delete_security_group(GroupId=group)


@mock_aws
def test_nothing_to_revoke_is_not_an_error() -> None:
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="g", Description="g", VpcId=vpc)["GroupId"]
    assert revoke_cross_references(ec2, [group]) == 0
