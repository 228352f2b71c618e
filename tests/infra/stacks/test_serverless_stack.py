"""The serverless stack, synthesized from tests/fixtures/cdk_serverless.json:
the application, the job run resource, the supervisor (cdk-nag and cfn-lint:
tests/infra/stacks/test_nag_and_lint.py);
the EMR neighbour in the same region keeps its cluster."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.constructs.emr_cluster import cluster_configurations
from infra.emr_step import CLUSTER_ID_OUTPUT, STEP_SPEC_OUTPUT, StepSpec
from infra.serverless.job_run import application_spark_defaults
from infra.supervisor import handler, serverless
from model.spark_conf import GLUE_HIVE_SITE
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.synth

LIGHT = "Streaming-light-us-east-1"
ORDERS = "Streaming-orders-us-east-1"
# https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html
LAMBDA_ENVIRONMENT_BYTES = 4096


def _application(synth: Synthesized) -> dict[str, Any]:
    _, resource = synth.one(LIGHT, "AWS::EMRServerless::Application")
    properties: dict[str, Any] = resource["Properties"]
    return properties


def test_the_application_is_the_release_on_arm64_bounded_to_the_driver_and_executors(
    synthesized_serverless: Synthesized,
) -> None:
    app = _application(synthesized_serverless)
    config = synthesized_serverless.config(LIGHT)
    assert app["ReleaseLabel"] == "emr-spark-8.1.0"
    assert app["Architecture"] == "ARM64"
    assert "InitialCapacity" not in app  # nothing billed while idle
    shape = config.serverless
    assert app["MaximumCapacity"] == {
        "Cpu": f"{shape.driver.cpu + shape.executor.cpu * shape.executor_count} vCPU",
        "Memory": f"{shape.driver.memory_gb + shape.executor.memory_gb} GB",
        "Disk": "40 GB",
    }
    network = app["NetworkConfiguration"]
    # The private subnets of the Region's shared VPC (the fixture's network.shared).
    subnets = network["SubnetIds"]
    assert len(subnets) == 3
    for subnet in subnets:
        export = subnet["Fn::ImportValue"]
        assert export.startswith("Streaming-shared-us-east-1:")
        assert "PrivateSubnet" in export
    (group,) = network["SecurityGroupIds"]
    assert group["Fn::GetAtt"][0] in synthesized_serverless.resources(
        LIGHT, "AWS::EC2::SecurityGroup"
    )
    logging = app["MonitoringConfiguration"]["CloudWatchLoggingConfiguration"]
    (log_id,) = logging["LogGroupName"].values()
    log_group = synthesized_serverless.properties(LIGHT, log_id)
    assert log_group["RetentionInDays"] == config.serverless.log_retention_days
    assert "KmsKeyId" in log_group


def test_the_applications_spark_defaults_and_the_emr_clusters_come_from_one_source(
    synthesized_serverless: Synthesized,
) -> None:
    (defaults,) = _application(synthesized_serverless)["RuntimeConfiguration"]
    assert defaults["Classification"] == "spark-defaults"
    serverless_conf = defaults["Properties"]
    light = synthesized_serverless.config(LIGHT)
    assert serverless_conf == application_spark_defaults(light.serverless, light.shuffle_partitions)
    _, cluster = synthesized_serverless.one(ORDERS, "AWS::EMR::Cluster")
    by_class = {c["Classification"]: c for c in cluster["Properties"]["Configurations"]}
    emr_conf = by_class["spark-defaults"]["ConfigurationProperties"]
    orders = synthesized_serverless.config(ORDERS)
    assert orders.shuffle_partitions == 1, "small: one state partition for a new checkpoint"
    assert (
        emr_conf
        == cluster_configurations(orders.emr, orders.shuffle_partitions)[0][
            "configurationProperties"
        ]
    )
    for conf in (serverless_conf, emr_conf):
        assert conf["spark.dynamicAllocation.enabled"] == "false"
        assert conf["spark.sql.catalogImplementation"] == "hive"
        assert conf["spark.executor.instances"].isdigit()
    factory = "hive.metastore.client.factory.class"
    assert serverless_conf[f"spark.hadoop.{factory}"] == GLUE_HIVE_SITE[factory]
    assert (
        by_class["spark-hive-site"]["ConfigurationProperties"][factory] == (GLUE_HIVE_SITE[factory])
    )


def test_the_job_run_resource_carries_the_request_and_the_handover(
    synthesized_serverless: Synthesized,
) -> None:
    stack = synthesized_serverless.stacks[LIGHT]
    assert stack.serverless is not None
    logical_id, resource = synthesized_serverless.one(LIGHT, "Custom::ServerlessJobRun")
    properties = resource["Properties"]
    assert properties["StartJobRun"] == stack.resolve(stack.serverless.request)
    request = properties["StartJobRun"]
    assert (request["mode"], request["executionTimeoutMinutes"]) == ("STREAMING", 0)
    # max_restarts_per_hour 5: four attempts for the service, one restart for the supervisor.
    assert request["retryPolicy"] == {"maxFailedAttemptsPerHour": 4}
    handover = properties["Handover"]
    assert handover["StopTimeoutSec"] == stack.job_config.graceful_stop_timeout_sec + 120
    assert handover["StopTimeoutSec"] + handover["CancelTimeoutSec"] + 60 <= 900
    # It waits for the job's files and permissions.
    depends = set(resource["DependsOn"])
    assert "FailureTopic" in depends
    assert any(d.startswith("ServerlessExecutionRoleDefaultPolicy") for d in depends)
    function_id = properties["ServiceToken"]["Fn::GetAtt"][0]
    function = synthesized_serverless.templates[LIGHT]["Resources"][function_id]
    assert function["Properties"]["Handler"] == "infra.serverless_job_run_handler.handler"
    assert function["Properties"]["Timeout"] == 900
    assert logical_id.startswith("ServerlessJobRun")


def test_the_lifecycle_wiring_of_the_job_run_and_the_application_guard(
    synthesized_serverless: Synthesized,
) -> None:
    """Destroy, update and rollback on AWS (docs/serverless.md, "Lifecycle"):
    the stable ID's run in GetAtt, ServiceTimeout, the guard the application
    depends on, the hash both resources and the application's tag carry, and
    the grants the Delete and the guard need."""
    template = synthesized_serverless.templates[LIGHT]
    resources = template["Resources"]
    app_id, app = synthesized_serverless.one(LIGHT, "AWS::EMRServerless::Application")
    job_id, job_run = synthesized_serverless.one(LIGHT, "Custom::ServerlessJobRun")
    guard_id, guard = synthesized_serverless.one(LIGHT, "Custom::ServerlessApplicationGuard")
    tags = {tag["Key"]: tag["Value"] for tag in app["Properties"]["Tags"]}
    config = tags["streaming:config-hash"]
    assert job_run["Properties"]["ConfigHash"] == guard["Properties"]["ConfigHash"] == config
    assert guard_id in app["DependsOn"], "the guard must run before the application's update"
    assert guard["Properties"]["ApplicationName"] == app["Properties"]["Name"]
    assert app_id not in json.dumps(guard), "a reference to the application is a cycle"
    guard_function = resources[guard["Properties"]["ServiceToken"]["Fn::GetAtt"][0]]
    assert app_id not in json.dumps(guard_function)
    # CloudFormation custom resource ServiceTimeout (1-3600 s, default 3600).
    for resource in (job_run, guard):
        assert 900 < int(resource["Properties"]["ServiceTimeout"]) <= 1000
        assert "/pending-run.json" in json.dumps(resource["Properties"]["Handover"])
    # The run's ID is an attribute of the stable resource, not its physical ID.
    outputs = json.dumps(template["Outputs"])
    assert json.dumps({"Fn::GetAtt": [job_id, "JobRunId"]}) in outputs
    assert json.dumps({"Ref": job_id}) not in outputs
    # The job-run function may stop its own application (Delete).
    role_id = resources[job_run["Properties"]["ServiceToken"]["Fn::GetAtt"][0]]["Properties"][
        "Role"
    ]["Fn::GetAtt"][0]
    statements = [
        statement
        for resource in resources.values()
        if resource["Type"] == "AWS::IAM::Policy"
        and {"Ref": role_id} in resource["Properties"]["Roles"]
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]
    own = next(st for st in statements if st.get("Sid") == "RunsOfOwnApplication")
    assert {"emr-serverless:StopApplication", "emr-serverless:GetApplication"} <= set(own["Action"])
    assert app_id in json.dumps(own["Resource"])


def test_the_execution_role_can_deliver_logs_to_cloudwatch(
    synthesized_serverless: Synthesized,
) -> None:
    """UG "Logging for EMR Serverless with Amazon CloudWatch"
    (https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/logging.html#jobs-log-storage-cw)
    and the CloudWatch Logs guide
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/AWS-logs-infrastructure-CWL.html,
    "User permissions"): DescribeLogGroups on the wildcard log-group ARN of the
    account and Region, never one group's; the stream actions on the job's group."""
    stack = synthesized_serverless.stacks[LIGHT]
    assert stack.serverless is not None
    role_id = stack.resolve(stack.serverless.execution_role.role_name)["Ref"]
    statements = [
        statement
        for resource in synthesized_serverless.resources(LIGHT, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in resource["Properties"]["Roles"]
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    ]
    describe = [st for st in statements if "logs:DescribeLogGroups" in json.dumps(st["Action"])]
    assert describe, "no logs:DescribeLogGroups"
    for statement in describe:
        resource = json.dumps(statement["Resource"])
        # The wildcard over the account's groups, not one group's name.
        assert resource.count("log-group") == 1 and ':log-group:*"' in resource, resource
        assert ":logs:" in resource
    writes = next(st for st in statements if st.get("Sid") == "WriteOwnLogGroup")
    assert {"logs:CreateLogStream", "logs:PutLogEvents"} <= set(writes["Action"])


def test_the_supervisor_restarts_with_the_same_request_within_the_lambda_limits(
    synthesized_serverless: Synthesized,
) -> None:
    stack = synthesized_serverless.stacks[LIGHT]
    (function,) = [
        r["Properties"]
        for r in synthesized_serverless.resources(LIGHT, "AWS::Lambda::Function").values()
        if r["Properties"].get("Handler") == serverless.HANDLER
    ]
    env = function["Environment"]["Variables"]
    _, job_run = synthesized_serverless.one(LIGHT, "Custom::ServerlessJobRun")
    rendered = json.loads(json.dumps(stack.resolve(env)))
    assert rendered[serverless.ENV_REQUEST] == stack.resolve(
        stack.to_json_string(stack.serverless.request)  # type: ignore[union-attr]
    )
    assert job_run["Properties"]["StartJobRun"]["name"] in json.dumps(rendered)
    policy = json.loads(env[handler.ENV_POLICY])
    assert policy["max_restarts"] == 1  # the supervisor's share of 5
    # The variables' total stays under Lambda's 4 KB (the request's tokens
    # render longer at deploy: bucket names, ARNs; leave a margin).
    assert len(json.dumps(env)) < LAMBDA_ENVIRONMENT_BYTES * 0.75


def test_the_emr_neighbour_keeps_its_cluster_and_runs_no_serverless_resource(
    synthesized_serverless: Synthesized,
) -> None:
    resources = synthesized_serverless.templates[ORDERS]["Resources"]
    types = {r["Type"] for r in resources.values()}
    assert {"AWS::EMR::Cluster", "AWS::EMR::Step"} <= types
    assert not {"AWS::EMRServerless::Application", "Custom::ServerlessJobRun"} & types
    light = {r["Type"] for r in synthesized_serverless.templates[LIGHT]["Resources"].values()}
    assert not {"AWS::EMR::Cluster", "AWS::EMR::Step", "AWS::IAM::InstanceProfile"} & light


def test_make_status_finds_the_deployed_config_as_on_emr(
    synthesized_serverless: Synthesized,
) -> None:
    outputs = synthesized_serverless.templates[LIGHT]["Outputs"]
    stack = synthesized_serverless.stacks[LIGHT]
    raw = stack.resolve(outputs[STEP_SPEC_OUTPUT]["Value"])
    assert raw == stack.resolve(stack.to_json_string(stack.job.step_spec.to_dict()))
    assert StepSpec.from_dict(stack.job.step_spec.to_dict()).config_uri.endswith("/job-config.json")
    assert CLUSTER_ID_OUTPUT not in outputs  # make redeploy refuses: no cluster
