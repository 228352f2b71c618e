"""Preflight's stack checks (scripts/preflight/stack.py): what a destroyed
RETAIN instance left behind (moto: CloudFormation, Kinesis, Glue, MSK, Logs;
a fake for MSK's DescribeTopic, which moto lacks), and the ``deployed``
record against the stack's template (a fake CloudFormation answering
DescribeStacks and GetTemplate)."""

from __future__ import annotations

import json
from typing import Any

import boto3
from moto import mock_aws

from scripts.preflight.stack import check_deployed_record, check_left_behind, deployed_values
from tests.scripts.preflight.fakes import Answers, client_error, config_of

REGION = "eu-west-1"
STACK = "Streaming-orders-eu-west-1"
STREAM = "streaming-orders-eu-west-1"
DATABASE = "streaming_orders_eu_west_1"
TOPIC = "streaming.orders.eu-west-1.failures"
MSK_ARN = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"


def _clients(**extra: Any) -> dict[str, Any]:
    clients = {
        service: boto3.client(service, region_name=REGION)
        for service in ("cloudformation", "kinesis", "glue", "kafka", "logs")
    }
    return {**clients, **extra}


# ------------------------------------------------------------------ left behind


@mock_aws
def test_nothing_left_behind_passes() -> None:
    result = check_left_behind(config_of(), _clients())
    assert result.status == "PASS"
    assert result.detail == (
        f"stack {STACK} does not exist and none of its fixed-name resources do"
    )


@mock_aws
def test_a_destroyed_retain_instance_fails_naming_each_leftover_and_both_ways() -> None:
    boto3.client("kinesis", region_name=REGION).create_stream(StreamName=STREAM, ShardCount=1)
    boto3.client("glue", region_name=REGION).create_database(DatabaseInput={"Name": DATABASE})
    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(logGroupName=f"/{STACK}/Network/FlowLogs")
    logs.create_log_group(logGroupName="/Streaming-orders-eu-west-2/Network/FlowLogs")
    cluster = boto3.client("kafka", region_name=REGION).create_cluster_v2(
        ClusterName=STACK,
        Provisioned={
            "BrokerNodeGroupInfo": {"InstanceType": "kafka.m5.large",
                                    "ClientSubnets": ["subnet-1", "subnet-2"]},
            "KafkaVersion": "3.6.0",
            "NumberOfBrokerNodes": 2,
        },
    )["ClusterArn"]  # fmt: skip
    result = check_left_behind(config_of(), _clients())
    assert result.status == "FAIL"
    assert result.detail.startswith(
        f"stack {STACK} does not exist but 4 of its fixed-name resources do (RETAIN keeps "
        f"them on cdk destroy): Kinesis stream {STREAM}; Glue database {DATABASE}; "
        f"MSK cluster {STACK} ({cluster}, with topic {TOPIC}); "
        f"log group /{STACK}/Network/FlowLogs; a deploy would fail creating them again"
    )
    assert "eu-west-2" not in result.detail
    assert result.fix.startswith(
        f"keep the data: import them into the stack (npx cdk import {STACK};"
    )
    for command in (
        f"aws kinesis delete-stream --stream-name {STREAM} --region {REGION}",
        f"aws glue delete-database --name {DATABASE} --region {REGION}",
        f"aws kafka delete-cluster --cluster-arn {cluster} --region {REGION}",
        f"aws logs delete-log-group --log-group-name /{STACK}/Network/FlowLogs --region {REGION}",
    ):
        assert command in result.fix


@mock_aws
def test_a_topic_left_on_an_imported_cluster_fails() -> None:
    kafka = Answers(describe_topic={"TopicName": TOPIC, "ReplicationFactor": 3})
    result = check_left_behind(config_of(kafka={"cluster_arn": MSK_ARN}), _clients(kafka=kafka))
    assert result.status == "FAIL"
    assert f"failure topic {TOPIC} on {MSK_ARN}" in result.detail
    assert kafka.calls == [("describe_topic", {"ClusterArn": MSK_ARN, "TopicName": TOPIC})]
    assert "kafka-topics.sh --delete" in result.fix


@mock_aws
def test_no_topic_on_an_imported_cluster_passes() -> None:
    kafka = Answers(describe_topic=client_error("NotFoundException", "DescribeTopic"))
    result = check_left_behind(config_of(kafka={"cluster_arn": MSK_ARN}), _clients(kafka=kafka))
    assert result.status == "PASS"


@mock_aws
def test_an_unreadable_resource_is_a_fail_not_a_pass() -> None:
    kafka = Answers(describe_topic=client_error("AccessDeniedException", "DescribeTopic"))
    result = check_left_behind(config_of(kafka={"cluster_arn": MSK_ARN}), _clients(kafka=kafka))
    assert result.status == "FAIL"
    assert "not checked: failure topic" in result.detail
    assert "kafka:DescribeTopic" in result.fix


@mock_aws
def test_a_rolled_back_first_create_counts_as_no_stack() -> None:
    """Its retained resources are outside it, and cdk deploy deletes it first."""
    boto3.client("kinesis", region_name=REGION).create_stream(StreamName=STREAM, ShardCount=1)
    rolled_back = Answers(
        describe_stacks={"Stacks": [{"StackName": STACK, "StackStatus": "ROLLBACK_COMPLETE"}]}
    )
    config = config_of(removal_policy="DESTROY")
    result = check_left_behind(config, _clients(cloudformation=rolled_back))
    assert result.status == "FAIL"
    assert "(a delete that did not finish, or made by hand): Kinesis stream" in result.detail
    assert check_deployed_record(config, {"cloudformation": rolled_back}).status == "PASS"


@mock_aws
def test_an_existing_stack_owns_its_resources() -> None:
    cloudformation = boto3.client("cloudformation", region_name=REGION)
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}
    cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(template))
    boto3.client("kinesis", region_name=REGION).create_stream(StreamName=STREAM, ShardCount=1)
    result = check_left_behind(config_of(), _clients())
    assert result.status == "PASS"
    assert result.detail.startswith(f"stack {STACK} exists (CREATE_COMPLETE)")


# ------------------------------------------------------------------ the deployed record


def _template(shards: int | None = 4, factor: int = 3) -> dict[str, Any]:
    stream: dict[str, Any] = {"Name": STREAM}
    if shards is not None:
        stream["ShardCount"] = shards
    return {
        "Resources": {
            "EventsStream": {"Type": "AWS::Kinesis::Stream", "Properties": stream},
            "FailureTopic": {"Type": "AWS::MSK::Topic",
                             "Properties": {"TopicName": TOPIC, "ReplicationFactor": factor}},
            "EmrCluster": {"Type": "AWS::EMR::Cluster", "Properties": {"Configurations": [
                {"Classification": "spark-hive-site", "ConfigurationProperties": {}},
                {"Classification": "spark-defaults",
                 "ConfigurationProperties": {"spark.sql.shuffle.partitions": "20"}},
            ]}},
        }
    }  # fmt: skip


def _stack(template: dict[str, Any] | None) -> dict[str, Any]:
    if template is None:
        missing = client_error(
            "ValidationError", "DescribeStacks", f"Stack with id {STACK} does not exist"
        )
        return {"cloudformation": Answers(describe_stacks=missing)}
    return {
        "cloudformation": Answers(
            describe_stacks={"Stacks": [{"StackName": STACK, "StackStatus": "UPDATE_COMPLETE"}]},
            # GetTemplate's body arrives as a string (YAML/JSON) or, decoded by boto3, a dict.
            get_template={"TemplateBody": json.dumps(template)},
        )
    }


def test_the_template_values_the_record_holds() -> None:
    assert deployed_values(_template()) == {
        "shard_count": 4,
        "topic_replication_factor": 3,
        "shuffle_partitions": 20,
    }
    assert deployed_values(_template(None))["shard_count"] is None
    assert deployed_values({"Resources": {}})["shuffle_partitions"] is None


def test_a_record_that_matches_the_stack_passes() -> None:
    config = config_of(stream={"shard_count": 4},
                       deployed={"shard_count": 4, "topic_replication_factor": 3,
                                 "shuffle_partitions": 20})  # fmt: skip
    result = check_deployed_record(config, _stack(_template()))
    assert result.status == "PASS"


def test_a_record_that_differs_from_the_stack_fails_with_the_values() -> None:
    config = config_of(stream={"shard_count": 4},
                       deployed={"shard_count": 2, "topic_replication_factor": 3})  # fmt: skip
    result = check_deployed_record(config, _stack(_template()))
    assert result.status == "FAIL"
    assert "deployed.shard_count 2 (the stack holds 4)" in result.detail
    assert result.fix == (
        'set "deployed": {"shard_count": 4, "topic_replication_factor": 3, '
        '"shuffle_partitions": 20} in the orders-eu-west-1 entry of cdk.json'
    )


def test_a_deployed_stack_without_a_record_is_a_warning() -> None:
    result = check_deployed_record(config_of(stream={"shard_count": 4}), _stack(_template()))
    assert result.status == "WARN"
    assert "synth cannot refuse" in result.detail
    assert (
        '"deployed": {"shard_count": 4, "topic_replication_factor": 3, "shuffle_partitions": 20}'
    ) in result.fix


def test_a_record_without_a_stack_is_a_warning_and_no_record_passes() -> None:
    recorded = check_deployed_record(config_of(deployed={"shard_count": 4}), _stack(None))
    assert recorded.status == "WARN"
    assert "remove the deployed section of orders-eu-west-1" in recorded.fix
    assert check_deployed_record(config_of(), _stack(None)).status == "PASS"


def test_an_unreadable_stack_fails_naming_the_permission() -> None:
    denied = {
        "cloudformation": Answers(describe_stacks=client_error("AccessDenied", "DescribeStacks"))
    }
    result = check_deployed_record(config_of(), denied)
    assert result.status == "FAIL" and "cloudformation:DescribeStacks" in result.fix


def test_a_serverless_applications_shuffle_partitions_are_read_back() -> None:
    application = {
        "Type": "AWS::EMRServerless::Application",
        "Properties": {
            "RuntimeConfiguration": [
                {
                    "Classification": "spark-defaults",
                    "Properties": {"spark.sql.shuffle.partitions": "2"},
                }
            ]
        },
    }
    template = {"Resources": {"App": application}}
    assert deployed_values(template)["shuffle_partitions"] == 2
