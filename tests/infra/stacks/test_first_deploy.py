"""What a first ``cdk deploy`` (and a ``cdk destroy``) on a real account needs,
checked in the synthesized templates. Each test names the
documentation page its AWS fact comes from (docs/deploy.md, "First deploy")."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from aws_cdk import Stack

from infra.config import (
    PLACEHOLDER_TLS_URI,
    SELECTION_CONTEXT_KEY,
    InstanceConfigError,
    read_cdk_context,
)
from infra.constructs.buckets import (
    ACCESS_LOGS_BUCKET_LOGICAL_ID,
    ARTIFACTS_BUCKET_LOGICAL_ID,
    DATA_BUCKET_LOGICAL_ID,
)
from infra.stacks.application import build_app
from tests.infra.conftest import EXAMPLE_CDK_JSON, Synthesized

ALL = [
    "Streaming-orders-ap-northeast-2",
    "Streaming-payments-ap-northeast-2",
    "Streaming-orders-eu-west-1",
]
DESTROY = "Streaming-orders-eu-west-1"
BUCKETS = (DATA_BUCKET_LOGICAL_ID, ARTIFACTS_BUCKET_LOGICAL_ID, ACCESS_LOGS_BUCKET_LOGICAL_ID)


def _cluster(synthesized: Synthesized, name: str) -> dict[str, Any]:
    return synthesized.one(name, "AWS::EMR::Cluster")[1]


def _statements(synthesized: Synthesized, name: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in synthesized.resources(name, "AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _actions(statement: dict[str, Any]) -> set[str]:
    actions = statement["Action"]
    return {actions} if isinstance(actions, str) else set(actions)


# ------------------------------------------------------------ item 2: placeholder TLS URI


def test_a_deployable_synth_refuses_the_placeholder_tls_uri() -> None:
    """Without the synth-check flag (``cdk deploy`` runs the app without it) the
    shipped placeholder stops synth, naming each instance and the command."""
    context = dict(read_cdk_context(EXAMPLE_CDK_JSON))
    assert context["streaming"]["defaults"]["emr"]["tls_certificates_s3_uri"] == (
        PLACEHOLDER_TLS_URI
    )
    with pytest.raises(InstanceConfigError) as caught:
        build_app(context)
    message = str(caught.value)
    assert "instance orders-eu-west-1: field emr.tls_certificates_s3_uri: still the example" in (
        message
    )
    assert "make certs INSTANCE=orders-eu-west-1" in message
    assert len(message.splitlines()) == 3  # one line per instance


def test_a_real_tls_uri_synthesizes_without_the_flag() -> None:
    context = json.loads(json.dumps(read_cdk_context(EXAMPLE_CDK_JSON)))
    for entry in context["streaming"]["instances"]:
        own = f"s3://my-bucket/tls/{entry['domain']}-{entry['region']}/certs.zip"
        entry["emr"] = {**entry.get("emr", {}), "tls_certificates_s3_uri": own}
    _app, stacks = build_app(context)
    assert len(stacks) == 3


def test_a_selection_refuses_the_placeholders_of_the_selected_instances_only() -> None:
    """``-c streaming:instances=...`` builds the selected
    instances (and the shared stacks they use) and refuses only their
    placeholders; an unknown name is refused with the names there are."""
    context = json.loads(json.dumps(read_cdk_context(EXAMPLE_CDK_JSON)))
    (orders,) = [i for i in context["streaming"]["instances"] if i["region"] == "eu-west-1"]
    orders["emr"] = {"tls_certificates_s3_uri": "s3://my-bucket/tls/orders-eu-west-1/c.zip"}
    context[SELECTION_CONTEXT_KEY] = "orders-eu-west-1"
    app, stacks = build_app(context)
    assert [s.stack_name for s in stacks] == ["Streaming-orders-eu-west-1"]
    assert [c.node.id for c in app.node.children if isinstance(c, Stack)] == [
        "Streaming-orders-eu-west-1"
    ]
    context[SELECTION_CONTEXT_KEY] = "orders-eu-west-1,payments-ap-northeast-2"
    with pytest.raises(InstanceConfigError) as caught:
        build_app(context)
    (line,) = str(caught.value).splitlines()
    assert line.startswith("instance payments-ap-northeast-2: field emr.tls_certificates_s3_uri")
    context[SELECTION_CONTEXT_KEY] = "orders-eu-west-2"
    with pytest.raises(InstanceConfigError, match="bad value 'orders-eu-west-2'; allowed: "):
        build_app(context)


# ------------------------------------------------------------ item 3: EBS customer key


@pytest.mark.parametrize("name", ALL)
def test_roles_may_describe_the_disk_key_and_grant_only_for_aws_resources(
    synthesized: Synthesized, name: str
) -> None:
    """https://docs.aws.amazon.com/ebs/latest/userguide/ebs-encryption-requirements.html:
    EBS with a customer key needs kms:DescribeKey; CreateGrant scoped with
    kms:GrantIsForAWSResource."""
    statements = _statements(synthesized, name)
    describe = [s for s in statements if "kms:DescribeKey" in _actions(s)]
    assert len(describe) >= 2  # job role and service role
    grants = [s for s in statements if "kms:CreateGrant" in _actions(s)]
    assert len(grants) == 2
    for statement in grants:
        assert _actions(statement) == {"kms:CreateGrant"}
        assert statement["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": True}}


# ------------------------------------------------------------ item 5: startup order


@pytest.mark.parametrize("name", ALL)
def test_cluster_starts_after_the_nat_route_and_the_s3_endpoint(
    synthesized: Synthesized, name: str
) -> None:
    resources = synthesized.templates[name]["Resources"]
    cluster = _cluster(synthesized, name)
    subnet = cluster["Properties"]["Instances"]["Ec2SubnetId"]["Ref"]
    depends = set(cluster["DependsOn"])
    nat_routes = [
        logical_id
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::EC2::Route"
        and "NatGatewayId" in r["Properties"]
        and logical_id in depends
    ]
    assert len(nat_routes) == 1
    # ... and it is the route of the cluster's own subnet's route table.
    route_table = resources[nat_routes[0]]["Properties"]["RouteTableId"]["Ref"]
    associations = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::SubnetRouteTableAssociation"
    ]
    assert {"RouteTableId": {"Ref": route_table}, "SubnetId": {"Ref": subnet}} in associations
    endpoints = [
        logical_id
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::EC2::VPCEndpoint" and r["Properties"]["VpcEndpointType"] == "Gateway"
    ]
    assert endpoints and set(endpoints) <= depends


# ------------------------------------------------------------ item 7: teardown


def test_destroy_instance_empties_every_bucket_after_the_cluster_is_gone(
    synthesized: Synthesized,
) -> None:
    resources = synthesized.templates[DESTROY]["Resources"]
    auto_delete = {
        r["Properties"]["BucketName"]["Ref"]: logical_id
        for logical_id, r in resources.items()
        if r["Type"] == "Custom::S3AutoDeleteObjects"
    }
    assert set(auto_delete) == set(BUCKETS)
    for bucket in BUCKETS:
        assert resources[bucket]["DeletionPolicy"] == "Delete"
    # CloudFormation deletes in reverse dependency order: the cluster (which
    # writes logs and data) goes first, then the buckets are emptied.
    assert set(auto_delete.values()) <= set(_cluster(synthesized, DESTROY)["DependsOn"])


@pytest.mark.parametrize("name", [n for n in ALL if n != DESTROY])
def test_retain_instances_never_empty_their_buckets(synthesized: Synthesized, name: str) -> None:
    types = {r["Type"] for r in synthesized.templates[name]["Resources"].values()}
    assert "Custom::S3AutoDeleteObjects" not in types


@pytest.mark.parametrize("name", ALL)
def test_emr_group_cross_references_are_revoked_after_the_cluster_is_deleted(
    synthesized: Synthesized, name: str
) -> None:
    resources = synthesized.templates[name]["Resources"]
    cleanup_id, cleanup = synthesized.one(name, "Custom::EmrSecurityGroupCleanup")
    instances = _cluster(synthesized, name)["Properties"]["Instances"]
    groups = [
        instances[key]
        for key in (
            "EmrManagedMasterSecurityGroup",
            "EmrManagedSlaveSecurityGroup",
            "ServiceAccessSecurityGroup",
        )
    ]
    assert cleanup["Properties"]["GroupIds"] == groups
    assert cleanup_id in _cluster(synthesized, name)["DependsOn"]
    function_id = cleanup["Properties"]["ServiceToken"]["Fn::GetAtt"][0]
    function = resources[function_id]["Properties"]
    assert "revoke_cross_references" in function["Code"]["ZipFile"]
    role = function["Role"]["Fn::GetAtt"][0]
    revoke = [
        s for s in _statements(synthesized, name) if "ec2:RevokeSecurityGroupIngress" in _actions(s)
    ]
    assert len(revoke) == 1 and len(revoke[0]["Resource"]) == 3
    assert role in resources


# ------------------------------------------------------------ item 10: hardening


def _flat(value: Any) -> str:
    """A string or ``Fn::Join`` (nested ones too) as text, references as ``${...}``."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_flat(part) for part in parts)
    return "${" + json.dumps(value, sort_keys=True) + "}"


@pytest.mark.parametrize("name", ALL)
def test_flow_broker_and_cleanup_log_groups_are_kms_encrypted(
    synthesized: Synthesized, name: str
) -> None:
    """https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html"""
    resources = synthesized.templates[name]["Resources"]
    flow = next(r for r in resources.values() if r["Type"] == "AWS::EC2::FlowLog")
    msk = synthesized.one(name, "AWS::MSK::Cluster")[1]["Properties"]
    cleanup = synthesized.one(name, "Custom::EmrSecurityGroupCleanup")[1]
    cleanup_function = resources[cleanup["Properties"]["ServiceToken"]["Fn::GetAtt"][0]]
    upload_function = next(
        r
        for logical_id, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function"
        and logical_id.startswith("CustomCDKBucketDeployment")
    )
    group_refs = (
        flow["Properties"]["LogGroupName"]["Ref"],
        msk["LoggingInfo"]["BrokerLogs"]["CloudWatchLogs"]["LogGroup"]["Ref"],
        cleanup_function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"],
        # CDK's upload handler logs to a group of the stack's (helper_lambdas.py).
        upload_function["Properties"]["LoggingConfig"]["LogGroup"]["Ref"],
        # The supervisor's (infra/supervisor/construct.py).
        next(
            r["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
            for r in resources.values()
            if r["Type"] == "AWS::Lambda::Function"
            and r["Properties"].get("Handler") == "infra.supervisor.handler.handler"
        ),
        # CDK's bucket auto-delete provider (DESTROY stacks): its default group, made here.
        *[
            logical_id
            for logical_id, r in resources.items()
            if logical_id.startswith("AutoDeleteObjectsLogs") and r["Type"] == "AWS::Logs::LogGroup"
        ],
    )
    # ... and they are all the template's log groups.
    assert set(group_refs) == set(synthesized.resources(name, "AWS::Logs::LogGroup"))
    groups = [resources[ref]["Properties"] for ref in group_refs]
    assert all(group["RetentionInDays"] > 0 for group in groups)
    # One key for the stack's groups (infra/constructs/logs_key.py) ...
    (key_id,) = {group["KmsKeyId"]["Fn::GetAtt"][0] for group in groups}
    key = resources[key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    logs_use = [s for s in key["KeyPolicy"]["Statement"] if s.get("Sid") == "CloudWatchLogsUse"]
    assert len(logs_use) == 1
    # ... which CloudWatch Logs may use for exactly those groups: their ARNs, no wildcard.
    (arns,) = logs_use[0]["Condition"]["ArnEquals"].values()
    named = sorted(_flat(arn).split(":log-group:", 1)[1] for arn in arns)
    assert named == sorted(_flat(group["LogGroupName"]) for group in groups)
    assert "*" not in json.dumps(arns)


@pytest.mark.parametrize("name", ALL)
def test_access_log_bucket_is_versioned(synthesized: Synthesized, name: str) -> None:
    bucket = synthesized.templates[name]["Resources"][ACCESS_LOGS_BUCKET_LOGICAL_ID]["Properties"]
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    rules = bucket["LifecycleConfiguration"]["Rules"]
    assert any(r.get("NoncurrentVersionExpiration") for r in rules)


# ------------------------------------------------------------ item 6: topic durability


@pytest.mark.parametrize("name", ALL)
def test_failure_topic_is_durable_by_default(synthesized: Synthesized, name: str) -> None:
    topic = synthesized.templates[name]["Resources"]["FailureTopic"]["Properties"]
    text = base64.b64decode(topic["Configs"]).decode()
    assert "min.insync.replicas=2\n" in text
    assert topic["ReplicationFactor"] == 3
    msk = synthesized.one(name, "AWS::MSK::Cluster")[1]["Properties"]
    assert msk["NumberOfBrokerNodes"] == 3
    assert len(msk["BrokerNodeGroupInfo"]["ClientSubnets"]) == 3


def test_a_shared_stack_can_be_selected_alone() -> None:
    """``-c streaming:instances=shared-eu-west-1``: the shared stack only, no
    instance, whatever placeholders the instances hold."""
    context = json.loads(json.dumps(read_cdk_context(EXAMPLE_CDK_JSON)))
    context["streaming"]["shared"] = [{"region": "eu-west-1"}, {"region": "ap-northeast-2"}]
    context[SELECTION_CONTEXT_KEY] = "shared-eu-west-1"
    app, stacks = build_app(context)
    assert stacks == []
    assert [c.node.id for c in app.node.children if isinstance(c, Stack)] == [
        "Streaming-shared-eu-west-1"
    ]
