"""A region's shared stack (infra/stacks/shared_stack.py) and two small
instances on it: the shared stack synthesizes clean (cdk-nag, cfn-lint) with
one MSK cluster and no topic or grant of its own; each instance's job role
reaches its own topic and the cluster's Connect only, never the neighbour's
topic and never cluster-wide administration (with controls that the checker
does catch a wildcard)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from infra.constructs.failure_topic import JOB_CLUSTER_ACTIONS, JOB_TOPIC_ACTIONS
from tests.fixtures import EXAMPLE_CDK_JSON
from tests.infra.config_cases import existing_network
from tests.infra.conftest import Synthesized, check_context, synthesize

REGION = "us-east-1"
SHARED = "Streaming-shared-us-east-1"
A, B = "Streaming-refunds-us-east-1", "Streaming-invoices-us-east-1"
CLUSTER = "arn:aws:kafka:us-east-1:123456789012:cluster/streaming-failures-us-east-1/0b1c2d3e-aaaa"
NETWORK = existing_network(REGION)
# What a job may do on the shared cluster itself and on its own topic: the
# construct's grants (held below to no wildcard and no administration).
CLUSTER_ACTIONS = frozenset(JOB_CLUSTER_ACTIONS)
TOPIC_ACTIONS = frozenset(JOB_TOPIC_ACTIONS)
# MSK IAM actions that administer a cluster or its topics
# (https://docs.aws.amazon.com/msk/latest/developerguide/kafka-actions.html).
ADMIN_VERBS = ("Alter", "Create", "Delete", "Update", "Reboot")


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Synthesized, Path]:
    context = json.loads(json.dumps(check_context(EXAMPLE_CDK_JSON)))
    small = {
        "region": REGION,
        "size": "small",
        "network": {"shared": True},
        "kafka": {"shared": True},
    }
    context["streaming"]["shared"] = [{"region": REGION}]
    context["streaming"]["instances"] = [
        {"domain": domain, "emr": {"tls_certificates_s3_uri": f"s3://b-1/{domain}/c.zip"}, **small}
        for domain in ("refunds", "invoices")
    ]
    outdir = tmp_path_factory.mktemp("cdk.out.shared")
    return synthesize(context, outdir), outdir


def _shared_template(shared: tuple[Synthesized, Path]) -> tuple[dict[str, Any], Path]:
    path = shared[1] / f"{SHARED}.template.json"
    return json.loads(path.read_text()), path


def _of_type(template: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == type_}


def imported(synth: Synthesized, name: str, value: Any) -> str:
    """The export of the shared stack that ``value`` (a template value of
    instance ``name``) imports, or fail."""
    assert isinstance(value, dict) and set(value) == {"Fn::ImportValue"}, (name, value)
    export: str = value["Fn::ImportValue"]
    assert export.startswith(f"{SHARED}:"), export
    return export


def kafka_problems(
    statements: list[dict[str, Any]], own_topic: Any, cluster: Any = CLUSTER
) -> list[str]:
    """Every statement with a Kafka action must be the cluster's few actions on
    the cluster ARN, or the topic's two on this instance's own topic."""
    found = []
    for statement in statements:
        actions = statement["Action"]
        actions = [actions] if isinstance(actions, str) else actions
        kafka = [a for a in actions if a.startswith(("kafka-cluster:", "kafka:"))]
        if not kafka:
            continue
        resources = statement["Resource"]
        resources = resources if isinstance(resources, list) else [resources]
        if resources == [cluster] and set(kafka) <= CLUSTER_ACTIONS:
            continue
        if resources == [own_topic] and set(kafka) <= TOPIC_ACTIONS:
            continue
        found.append(f"{kafka} on {resources}")
    return found


@pytest.mark.synth
def test_the_shared_stack_passes_cdk_nag_and_cfn_lint(shared: tuple[Synthesized, Path]) -> None:
    synth = shared[0]
    assert synth.error is None, synth.error
    assert synth.report is not None and synth.report["pluginReports"] == []
    _template, path = _shared_template(shared)
    matches = lint_file(path, config=ManualArgs(regions=[REGION]))
    assert [f"{m.rule.id} {m.message}" for m in matches if m.rule.id[0] in "EFW"] == []


@pytest.mark.synth
def test_the_shared_stack_owns_one_cluster_no_topic_and_no_grant(
    shared: tuple[Synthesized, Path],
) -> None:
    template, _path = _shared_template(shared)
    (cluster,) = _of_type(template, "AWS::MSK::Cluster").values()
    props = cluster["Properties"]
    assert props["EnhancedMonitoring"] == "DEFAULT"
    assert props["BrokerNodeGroupInfo"]["InstanceType"] == "kafka.t3.small"
    assert props["ClientAuthentication"]["Sasl"]["Iam"]["Enabled"] is True
    assert not _of_type(template, "AWS::MSK::Topic")
    for policy in _of_type(template, "AWS::IAM::Policy").values():
        actions = json.dumps(policy["Properties"]["PolicyDocument"])
        assert "kafka" not in actions
    ingress = [
        rule
        for sg in _of_type(template, "AWS::EC2::SecurityGroup").values()
        for rule in sg["Properties"].get("SecurityGroupIngress", [])
    ]
    assert [(r["FromPort"], r["ToPort"]) for r in ingress] == [(9098, 9098)]
    assert "CidrIp" in ingress[0], "the shared VPC's own CIDR"
    assert set(template["Outputs"]) >= {"VpcId", "PrivateSubnetIds", "MskClusterArn"}


@pytest.mark.synth
def test_each_instance_reaches_only_its_own_topic_on_the_shared_cluster(
    shared: tuple[Synthesized, Path],
) -> None:
    synth = shared[0]
    topics, clusters = {}, {}
    for name in (A, B):
        (logical_id, topic) = synth.one(name, "AWS::MSK::Topic")
        clusters[name] = topic["Properties"]["ClusterArn"]
        assert "Cluster" in imported(synth, name, clusters[name])
        topics[name] = {"Fn::GetAtt": [logical_id, "TopicArn"]}
        assert not [
            t
            for t in synth.templates[name]["Resources"].values()
            if t["Type"] == "AWS::MSK::Cluster"
        ]
    for name in (A, B):
        role = synth.role_assumed_by(name, "ec2.amazonaws.com")
        statements = synth.policy_statements(name, role)
        assert kafka_problems(statements, topics[name], clusters[name]) == []
        granted = {
            json.dumps(s["Resource"], sort_keys=True)
            for s in statements
            if "kafka-cluster:WriteData" in s["Action"]
        }
        assert granted == {json.dumps(topics[name], sort_keys=True)}, "its own topic, once"
    # The two instances' topics are distinct resources of distinct stacks.
    assert synth.templates[A]["Resources"].keys() >= {"FailureTopic"}
    names = {synth.properties(n, "FailureTopic")["TopicName"] for n in (A, B)}
    assert len(names) == 2


def test_a_jobs_kafka_actions_name_no_wildcard_and_no_administration() -> None:
    granted = [*JOB_CLUSTER_ACTIONS, *JOB_TOPIC_ACTIONS]
    assert len(granted) == 8
    for action in granted:
        service, _, verb = action.partition(":")
        assert service in ("kafka-cluster", "kafka"), action
        assert "*" not in verb and not verb.startswith(ADMIN_VERBS), action


def test_control_a_topic_wildcard_or_admin_action_on_the_cluster_is_caught() -> None:
    own = {"Fn::GetAtt": ["FailureTopic", "TopicArn"]}
    wildcard_topics = CLUSTER.replace(":cluster/", ":topic/") + "/*"
    assert kafka_problems(
        [{"Action": ["kafka-cluster:WriteData"], "Resource": wildcard_topics}], own
    )
    assert kafka_problems([{"Action": "kafka-cluster:*", "Resource": CLUSTER}], own)
    assert kafka_problems([{"Action": ["kafka-cluster:CreateTopic"], "Resource": CLUSTER}], own)
    assert kafka_problems(
        [{"Action": ["kafka-cluster:WriteData"], "Resource": {"Fn::GetAtt": ["Other", "Arn"]}}],
        own,
    )
    ok = [
        {"Action": ["kafka-cluster:Connect"], "Resource": CLUSTER},
        {"Action": ["kafka-cluster:WriteData", "kafka-cluster:DescribeTopic"], "Resource": own},
    ]
    assert kafka_problems(ok, own) == []


@pytest.mark.synth
def test_instances_reference_the_shared_ids_and_deploy_after_the_shared_stack(
    shared: tuple[Synthesized, Path],
) -> None:
    """The VPC, subnets and cluster ARN are imports of the
    shared stack's exports (CloudFormation then refuses a shared-stack update
    that changes one while an instance imports it), and each instance's stack
    depends on the shared one (``cdk deploy`` deploys it first)."""
    synth, outdir = shared
    template, _path = _shared_template(shared)
    exports = {o["Export"]["Name"] for o in template["Outputs"].values() if "Export" in o}
    for name in (A, B):
        resources = synth.templates[name]["Resources"]
        (cluster,) = [r for r in resources.values() if r["Type"] == "AWS::EMR::Cluster"]
        subnet = cluster["Properties"]["Instances"]["Ec2SubnetId"]
        assert imported(synth, name, subnet) in exports
        groups = [r for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroup"]
        assert groups, name
        for group in groups:
            assert imported(synth, name, group["Properties"]["VpcId"]) in exports
        topic = synth.properties(name, "FailureTopic")
        assert imported(synth, name, topic["ClusterArn"]) in exports
        assert "vpc-" not in json.dumps(synth.templates[name]), "no literal VPC id"
        assert [d.stack_name for d in synth.stacks[name].dependencies] == [SHARED]
    manifest = json.loads((outdir / "manifest.json").read_text())
    for name in (A, B):
        assert SHARED in manifest["artifacts"][name]["dependencies"]
