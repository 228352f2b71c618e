"""An instance on an existing VPC and an existing MSK cluster: both imported
from configured ids (no lookups, so synth stays offline), nothing recreated."""

from __future__ import annotations

import base64

import pytest
from cfnlint.api import ManualArgs, lint_file

from tests.infra.conftest import EXISTING_MSK_ARN, EXISTING_NETWORK, Synthesized

pytestmark = pytest.mark.synth

NAME = "Streaming-refunds-eu-west-1"


def test_synth_is_clean(synthesized_existing: Synthesized) -> None:
    assert synthesized_existing.error is None
    assert synthesized_existing.report is not None
    assert synthesized_existing.report["pluginReports"] == []
    path = synthesized_existing.template_paths[NAME]
    matches = lint_file(path, config=ManualArgs(regions=["eu-west-1"]))
    assert [f"{m.rule.id} {m.message}" for m in matches] == []


def test_no_vpc_and_no_msk_cluster_are_created(synthesized_existing: Synthesized) -> None:
    types = {r["Type"] for r in synthesized_existing.templates[NAME]["Resources"].values()}
    assert not {"AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::NatGateway"} & types
    assert "AWS::MSK::Cluster" not in types
    assert synthesized_existing.stacks[NAME].account == "123456789012"


def test_topic_lands_on_the_configured_cluster(synthesized_existing: Synthesized) -> None:
    topic = synthesized_existing.templates[NAME]["Resources"]["FailureTopic"]["Properties"]
    assert topic["ClusterArn"] == EXISTING_MSK_ARN
    assert topic["ReplicationFactor"] == 3
    configs = base64.b64decode(topic["Configs"]).decode()
    assert "min.insync.replicas=2\n" in configs


def test_emr_runs_in_the_first_configured_private_subnet(
    synthesized_existing: Synthesized,
) -> None:
    _, cluster = synthesized_existing.one(NAME, "AWS::EMR::Cluster")
    instances = cluster["Properties"]["Instances"]
    assert instances["Ec2SubnetId"] == EXISTING_NETWORK["private_subnet_ids"][0]
    groups = synthesized_existing.resources(NAME, "AWS::EC2::SecurityGroup").values()
    assert {g["Properties"]["VpcId"] for g in groups} == {EXISTING_NETWORK["vpc_id"]}


def test_cluster_scoped_msk_actions_name_the_configured_cluster(
    synthesized_existing: Synthesized,
) -> None:
    statements = [
        statement
        for policy in synthesized_existing.resources(NAME, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if "kafka-cluster:Connect" in statement["Action"]
    ]
    assert [s["Resource"] for s in statements] == [EXISTING_MSK_ARN]
