"""Template assertions for every property the instance stacks promise,
against the synthesized shipped example (one synth per session)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from emr.releases import RELEASES
from infra.constructs.buckets import (
    ACCESS_LOGS_BUCKET_LOGICAL_ID,
    ARTIFACTS_BUCKET_LOGICAL_ID,
    ARTIFACTS_PREFIX,
    DATA_BUCKET_LOGICAL_ID,
    JOB_DATA_PREFIXES,
    listing_prefixes,
)
from infra.constructs.stream import STREAM_LOGICAL_ID
from infra.sizing import size_executors
from model import contract
from model.spark_conf import GLUE_HIVE_SITE
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.synth

ORDERS_AP = "Streaming-orders-ap-northeast-2"
PAYMENTS_AP = "Streaming-payments-ap-northeast-2"
ORDERS_EU = "Streaming-orders-eu-west-1"
ALL = (ORDERS_AP, PAYMENTS_AP, ORDERS_EU)
BUCKETS = (DATA_BUCKET_LOGICAL_ID, ARTIFACTS_BUCKET_LOGICAL_ID, ACCESS_LOGS_BUCKET_LOGICAL_ID)


def _props(synth: Synthesized, name: str, type_: str) -> dict[str, Any]:
    return synth.one(name, type_)[1]["Properties"]


def _text(value: object) -> str:
    return json.dumps(value, sort_keys=True)


def _private_subnet_refs(synth: Synthesized, name: str) -> list[dict[str, str]]:
    refs = []
    for logical_id, subnet in synth.resources(name, "AWS::EC2::Subnet").items():
        tags = {t["Key"]: t["Value"] for t in subnet["Properties"]["Tags"]}
        if tags["aws-cdk:subnet-type"] == "Private":
            assert subnet["Properties"]["MapPublicIpOnLaunch"] is False
            refs.append({"Ref": logical_id})
    assert refs
    return refs


def test_one_stack_per_instance_named_by_the_contract(synthesized: Synthesized) -> None:
    assert set(synthesized.templates) == set(ALL)
    for stack in synthesized.stacks.values():
        assert stack.stack_name == contract.stack_name(stack.config.domain, stack.config.region)
        assert stack.region == stack.config.region


# ------------------------------------------------------------------------ stream


@pytest.mark.parametrize(
    ("name", "shards", "hours"), [(ORDERS_AP, 4, 48), (PAYMENTS_AP, None, 24), (ORDERS_EU, 2, 24)]
)
def test_stream_name_capacity_retention_encryption(
    synthesized: Synthesized, name: str, shards: int | None, hours: int
) -> None:
    stream = synthesized.templates[name]["Resources"][STREAM_LOGICAL_ID]["Properties"]
    config = synthesized.config(name)
    assert stream["Name"] == contract.stream_name(config.domain, config.region)
    assert stream["RetentionPeriodHours"] == hours
    assert stream["StreamEncryption"] == {"EncryptionType": "KMS", "KeyId": "alias/aws/kinesis"}
    if shards is None:
        assert stream["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
        assert "ShardCount" not in stream
    else:
        assert stream["StreamModeDetails"] == {"StreamMode": "PROVISIONED"}
        assert stream["ShardCount"] == shards


# ------------------------------------------------------------------------ buckets


@pytest.mark.parametrize("name", ALL)
def test_buckets_encrypted_private_tls_only(synthesized: Synthesized, name: str) -> None:
    resources = synthesized.templates[name]["Resources"]
    policies = synthesized.resources(name, "AWS::S3::BucketPolicy").values()
    for logical_id in BUCKETS:
        bucket = resources[logical_id]["Properties"]
        rules = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert rules[0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms")
        assert bucket["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert "AccessControl" not in bucket
        (policy,) = [p for p in policies if p["Properties"]["Bucket"] == {"Ref": logical_id}]
        denies = [
            s
            for s in policy["Properties"]["PolicyDocument"]["Statement"]
            if s["Effect"] == "Deny"
            and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        ]
        assert denies and denies[0]["Action"] == "s3:*"


@pytest.mark.parametrize("name", ALL)
def test_buckets_log_access_and_expire_old_versions_and_logs(
    synthesized: Synthesized, name: str
) -> None:
    resources = synthesized.templates[name]["Resources"]
    for logical_id in (DATA_BUCKET_LOGICAL_ID, ARTIFACTS_BUCKET_LOGICAL_ID):
        bucket = resources[logical_id]["Properties"]
        assert bucket["LoggingConfiguration"]["DestinationBucketName"] == {
            "Ref": ACCESS_LOGS_BUCKET_LOGICAL_ID
        }
        assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
        rules = bucket["LifecycleConfiguration"]["Rules"]
        assert any(r.get("NoncurrentVersionExpiration", {}).get("NoncurrentDays") for r in rules)
    artifacts_rules = resources[ARTIFACTS_BUCKET_LOGICAL_ID]["Properties"][
        "LifecycleConfiguration"
    ]["Rules"]
    assert any(r.get("Prefix") == "emr-logs/" and r["ExpirationInDays"] for r in artifacts_rules)
    access_rules = resources[ACCESS_LOGS_BUCKET_LOGICAL_ID]["Properties"]["LifecycleConfiguration"][
        "Rules"
    ]
    assert any(r.get("ExpirationInDays") for r in access_rules)


@pytest.mark.parametrize(("name", "policy"), [(ORDERS_AP, "Retain"), (ORDERS_EU, "Delete")])
def test_stateful_resources_follow_the_removal_policy(
    synthesized: Synthesized, name: str, policy: str
) -> None:
    resources = synthesized.templates[name]["Resources"]
    for logical_id in (*BUCKETS, STREAM_LOGICAL_ID, "GlueDatabase", "FailureTopic"):
        assert resources[logical_id]["DeletionPolicy"] == policy, logical_id
        assert resources[logical_id]["UpdateReplacePolicy"] == policy, logical_id


# ------------------------------------------------------------------------ glue


@pytest.mark.parametrize("name", ALL)
def test_glue_database_of_its_own_in_its_bucket(synthesized: Synthesized, name: str) -> None:
    config = synthesized.config(name)
    database = synthesized.templates[name]["Resources"]["GlueDatabase"]["Properties"]
    assert database["CatalogId"] == {"Ref": "AWS::AccountId"}
    assert database["DatabaseInput"]["Name"] == contract.database_name(config.domain, config.region)
    location = database["DatabaseInput"]["LocationUri"]["Fn::Join"][1]
    assert location == [
        "s3://",
        {"Ref": DATA_BUCKET_LOGICAL_ID},
        f"/warehouse/{config.database_name}.db/",
    ]


# ------------------------------------------------------------------------ kafka


@pytest.mark.parametrize("name", ALL)
def test_failure_topic_on_the_created_cluster(synthesized: Synthesized, name: str) -> None:
    config = synthesized.config(name)
    cluster_id, _ = synthesized.one(name, "AWS::MSK::Cluster")
    topic = synthesized.templates[name]["Resources"]["FailureTopic"]["Properties"]
    assert topic["ClusterArn"] == {"Fn::GetAtt": [cluster_id, "Arn"]}
    assert topic["TopicName"] == contract.failure_topic_name(config.domain, config.region)
    assert topic["PartitionCount"] == config.kafka.topic_partitions
    assert topic["ReplicationFactor"] == config.kafka.topic_replication_factor
    lines = base64.b64decode(topic["Configs"]).decode().splitlines()
    configs = dict(line.split("=", 1) for line in lines)
    # Durable defaults: RF 3, min.insync.replicas 2, on 3 brokers: with a broker
    # down, writes go on and none acknowledged is lost.
    assert (topic["ReplicationFactor"], int(configs["min.insync.replicas"])) == (3, 2)
    assert int(configs["min.insync.replicas"]) == config.kafka.min_insync_replicas
    # Properties-file lines, the format MSK's DescribeTopic returns.
    assert all(line.count("=") == 1 for line in lines)
    assert int(configs["retention.ms"]) == config.kafka.topic_retention_hours * 3_600_000


@pytest.mark.parametrize("name", ALL)
def test_created_msk_cluster_is_private_tls_iam_logged(synthesized: Synthesized, name: str) -> None:
    cluster = _props(synthesized, name, "AWS::MSK::Cluster")
    major, minor = (int(part) for part in cluster["KafkaVersion"].split(".")[:2])
    assert (major, minor) >= (3, 6)
    assert cluster["ClientAuthentication"] == {
        "Sasl": {"Iam": {"Enabled": True}},
        "Unauthenticated": {"Enabled": False},
    }
    assert cluster["EncryptionInfo"]["EncryptionInTransit"] == {
        "ClientBroker": "TLS",
        "InCluster": True,
    }
    assert cluster["LoggingInfo"]["BrokerLogs"]["CloudWatchLogs"]["Enabled"] is True
    subnets = cluster["BrokerNodeGroupInfo"]["ClientSubnets"]
    assert subnets and all(s in _private_subnet_refs(synthesized, name) for s in subnets)
    assert cluster["NumberOfBrokerNodes"] % len(subnets) == 0
    assert (cluster["NumberOfBrokerNodes"], len(subnets)) == (3, 3)  # 3 brokers in 3 AZs


@pytest.mark.parametrize("name", ALL)
def test_brokers_admit_only_the_emr_groups_on_the_iam_port(
    synthesized: Synthesized, name: str
) -> None:
    ingress = synthesized.resources(name, "AWS::EC2::SecurityGroupIngress").values()
    emr = _props(synthesized, name, "AWS::EMR::Cluster")["Instances"]
    sources = {_text(rule["Properties"]["SourceSecurityGroupId"]) for rule in ingress}
    assert sources == {
        _text(emr["EmrManagedMasterSecurityGroup"]),
        _text(emr["EmrManagedSlaveSecurityGroup"]),
    }
    assert {(r["Properties"]["FromPort"], r["Properties"]["ToPort"]) for r in ingress} == {
        (9098, 9098)
    }


# ------------------------------------------------------------------------ emr


@pytest.mark.parametrize("name", ALL)
def test_emr_cluster_shape(synthesized: Synthesized, name: str) -> None:
    config = synthesized.config(name)
    cluster = _props(synthesized, name, "AWS::EMR::Cluster")
    assert cluster["ReleaseLabel"] == config.emr.release_label
    # From the release table: emr-spark-8.1.0's page lists no "Hadoop" application.
    assert [a["Name"] for a in cluster["Applications"]] == list(
        RELEASES[config.emr.release_label].applications
    )
    assert "Hadoop" not in {a["Name"] for a in cluster["Applications"]}
    instances = cluster["Instances"]
    assert instances["Ec2SubnetId"] in _private_subnet_refs(synthesized, name)
    assert instances["KeepJobFlowAliveWhenNoSteps"] is True
    assert instances["TerminationProtected"] is config.termination_protection
    assert instances["CoreInstanceGroup"]["InstanceType"] == config.emr.core_instance_type
    assert instances["CoreInstanceGroup"]["InstanceCount"] == config.emr.core_instance_count
    assert instances["MasterInstanceGroup"]["InstanceType"] == config.emr.master_instance_type
    assert cluster["LogUri"]["Fn::Join"][1] == [
        "s3://",
        {"Ref": ARTIFACTS_BUCKET_LOGICAL_ID},
        "/emr-logs/",
    ]
    security_id, _ = synthesized.one(name, "AWS::EMR::SecurityConfiguration")
    assert cluster["SecurityConfiguration"] == {"Ref": security_id}
    assert "ManagedScalingPolicy" not in cluster
    assert "AutoScalingRole" not in cluster
    assert "AutoTerminationPolicy" not in cluster


def test_termination_protection_follows_config(synthesized: Synthesized) -> None:
    stacks = {name: synthesized.stacks[name].termination_protection for name in ALL}
    assert stacks == {ORDERS_AP: True, PAYMENTS_AP: False, ORDERS_EU: False}
    protected = {
        name: _props(synthesized, name, "AWS::EMR::Cluster")["Instances"]["TerminationProtected"]
        for name in ALL
    }
    assert protected == {ORDERS_AP: True, PAYMENTS_AP: False, ORDERS_EU: False}


@pytest.mark.parametrize("name", ALL)
def test_emr_security_configuration_encrypts_at_rest_and_in_transit(
    synthesized: Synthesized, name: str
) -> None:
    config = synthesized.config(name)
    security = _props(synthesized, name, "AWS::EMR::SecurityConfiguration")
    encryption = security["SecurityConfiguration"]["EncryptionConfiguration"]
    assert encryption["EnableAtRestEncryption"] is True
    assert encryption["EnableInTransitEncryption"] is True
    at_rest = encryption["AtRestEncryptionConfiguration"]
    assert at_rest["S3EncryptionConfiguration"]["EncryptionMode"] == "SSE-S3"
    local = at_rest["LocalDiskEncryptionConfiguration"]
    assert local["EncryptionKeyProviderType"] == "AwsKms"
    assert local["EnableEbsEncryption"] is True
    key_id = local["AwsKmsKey"]["Fn::GetAtt"][0]
    key = synthesized.templates[name]["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["EnableKeyRotation"] is True
    tls = encryption["InTransitEncryptionConfiguration"]["TLSCertificateConfiguration"]
    assert tls == {"CertificateProviderType": "PEM", "S3Object": config.emr.tls_certificates_s3_uri}


@pytest.mark.parametrize("name", ALL)
def test_emr_nodes_require_imdsv2(synthesized: Synthesized, name: str) -> None:
    """IMDSv2 only (a session token for every metadata request), the field
    names of EMR's security configuration, on a release that supports it
    (EMR 6.2 and later; the release table holds emr-spark-8.x only)."""
    security = _props(synthesized, name, "AWS::EMR::SecurityConfiguration")
    assert security["SecurityConfiguration"]["InstanceMetadataServiceConfiguration"] == {
        "MinimumInstanceMetadataServiceVersion": 2,
        "HttpPutResponseHopLimit": 1,
    }
    label = synthesized.config(name).emr.release_label
    assert label.startswith("emr-spark-8."), label
    assert all(release.startswith("emr-spark-8.") for release in RELEASES), sorted(RELEASES)


@pytest.mark.parametrize("name", ALL)
def test_nodes_read_the_tls_zip_only_from_a_bucket_of_this_account(
    synthesized: Synthesized, name: str
) -> None:
    job_role = synthesized.role_assumed_by(name, "ec2.amazonaws.com")
    (tls,) = [
        s for s in _policies(synthesized, name, job_role) if s.get("Sid") == "ReadTlsCertificates"
    ]
    assert tls["Action"] == "s3:GetObject"
    assert tls["Condition"] == {"StringEquals": {"s3:ResourceAccount": {"Ref": "AWS::AccountId"}}}
    uri = synthesized.config(name).emr.tls_certificates_s3_uri
    assert _text(tls["Resource"]).endswith(uri.removeprefix("s3://") + '"]]}')


@pytest.mark.parametrize("name", ALL)
def test_spark_defaults_from_the_single_conf_source(synthesized: Synthesized, name: str) -> None:
    config = synthesized.config(name)
    cluster = _props(synthesized, name, "AWS::EMR::Cluster")
    classifications = {
        c["Classification"]: c["ConfigurationProperties"] for c in cluster["Configurations"]
    }
    spark = classifications["spark-defaults"]
    assert spark["spark.dynamicAllocation.enabled"] == "false"
    assert spark["spark.shuffle.service.enabled"] == "false"
    assert spark["spark.sql.catalogImplementation"] == "hive"
    assert spark["spark.speculation"] == "false"
    # Arrow batches bounded by rows only: no byte count after every row.
    assert spark["spark.sql.execution.arrow.maxBytesPerBatch"] == str(2**31 - 1)
    sizing = size_executors(config.emr.core_instance_type, config.emr.core_instance_count)
    assert spark["spark.executor.instances"] == str(sizing.instances)
    assert spark["spark.executor.cores"] == str(sizing.cores)
    assert spark["spark.executor.memory"] == f"{sizing.memory_mb}m"
    partitions = int(spark["spark.sql.shuffle.partitions"])
    assert partitions == sizing.instances * sizing.cores
    assert partitions != 200
    attempts = int(spark["spark.yarn.maxAppAttempts"])
    assert attempts > 1
    assert spark["spark.yarn.am.attemptFailuresValidityInterval"]
    assert int(classifications["yarn-site"]["yarn.resourcemanager.am.max-attempts"]) >= attempts
    assert classifications["spark-hive-site"] == GLUE_HIVE_SITE


def test_executor_sizing_differs_with_the_instance_type(synthesized: Synthesized) -> None:
    def executors(name: str) -> str:
        cluster = _props(synthesized, name, "AWS::EMR::Cluster")
        (spark,) = [c for c in cluster["Configurations"] if c["Classification"] == "spark-defaults"]
        return str(spark["ConfigurationProperties"]["spark.executor.instances"])

    # orders/ap: 3 x m5.2xlarge; payments/ap: 2 x m5.xlarge.
    assert executors(ORDERS_AP) != executors(PAYMENTS_AP)


# ------------------------------------------------------------------------ iam


def _policies(synth: Synthesized, name: str, role_id: str) -> list[dict[str, Any]]:
    statements = synth.policy_statements(name, role_id)
    assert statements
    return statements


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


@pytest.mark.parametrize("name", ALL)
def test_job_role_has_no_managed_policies_and_no_admin_wildcards(
    synthesized: Synthesized, name: str
) -> None:
    job_role = synthesized.role_assumed_by(name, "ec2.amazonaws.com")
    assert "ManagedPolicyArns" not in synthesized.properties(name, job_role)
    for statement in _policies(synthesized, name, job_role):
        assert statement["Effect"] == "Allow"
        for action in _actions(statement):
            assert action != "*" and not action.endswith(":*"), action
        if statement["Resource"] == "*":
            assert _actions(statement) == ["cloudwatch:PutMetricData"]
            assert statement["Condition"] == {
                "StringEquals": {
                    "cloudwatch:namespace": contract.metric_namespace(
                        synthesized.config(name).instance_id
                    )
                }
            }


@pytest.mark.parametrize("name", ALL)
def test_job_role_never_touches_object_versions_and_lists_only_its_prefixes(
    synthesized: Synthesized, name: str
) -> None:
    """No s3:DeleteObjectVersion (nor any *ObjectVersion* action, nor an S3
    action wildcard), and every s3:ListBucket is limited by s3:prefix to the
    prefixes the job and the nodes use."""
    job_role = synthesized.role_assumed_by(name, "ec2.amazonaws.com")
    allowed = set(listing_prefixes((*JOB_DATA_PREFIXES, ARTIFACTS_PREFIX)))
    listings = 0
    for statement in _policies(synthesized, name, job_role):
        s3_actions = [a for a in _actions(statement) if a.startswith("s3:")]
        for action in s3_actions:
            assert "*" not in action and "ObjectVersion" not in action, action
        if "s3:ListBucket" in s3_actions:
            listings += 1
            assert list(statement["Condition"]) == ["StringLike"], statement
            prefixes = statement["Condition"]["StringLike"]["s3:prefix"]
            assert prefixes and set(prefixes) <= allowed, prefixes
    assert listings == 2  # the data prefixes (DefaultPolicy) and artifacts/ (boot policy)


def test_listing_prefixes_cover_each_prefix_and_nothing_beside_it() -> None:
    assert listing_prefixes(("checkpoints/", "control/")) == [
        "checkpoints",
        "checkpoints/*",
        "control",
        "control/*",
    ]


@pytest.mark.parametrize("name", ALL)
def test_service_role_uses_only_the_tag_scoped_emr_policy(
    synthesized: Synthesized, name: str
) -> None:
    service_role = synthesized.role_assumed_by(name, "elasticmapreduce.amazonaws.com")
    (managed,) = synthesized.properties(name, service_role)["ManagedPolicyArns"]
    assert managed["Fn::Join"][1][-1].endswith(
        ":iam::aws:policy/service-role/AmazonEMRServicePolicy_v2"
    )
    pass_role = [
        s for s in _policies(synthesized, name, service_role) if "iam:PassRole" in _actions(s)
    ]
    job_role = synthesized.role_assumed_by(name, "ec2.amazonaws.com")
    assert [s["Resource"] for s in pass_role] == [{"Fn::GetAtt": [job_role, "Arn"]}]


@pytest.mark.parametrize("name", ALL)
def test_msk_actions_scoped_to_its_topic_and_cluster(synthesized: Synthesized, name: str) -> None:
    job_role = synthesized.role_assumed_by(name, "ec2.amazonaws.com")
    cluster_id, _ = synthesized.one(name, "AWS::MSK::Cluster")
    for statement in _policies(synthesized, name, job_role):
        actions = _actions(statement)
        if set(actions) & {"kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"}:
            assert set(actions) <= {"kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"}
            assert statement["Resource"] == {"Fn::GetAtt": ["FailureTopic", "TopicArn"]}
        elif any(a.startswith(("kafka-cluster:", "kafka:")) for a in actions):
            assert statement["Resource"] == {"Fn::GetAtt": [cluster_id, "Arn"]}
    writes = [
        s
        for s in _policies(synthesized, name, job_role)
        if "kafka-cluster:WriteData" in _actions(s)
    ]
    assert len(writes) == 1


@pytest.mark.parametrize("name", ALL)
def test_glue_actions_scoped_to_its_database(synthesized: Synthesized, name: str) -> None:
    """The job's catalog use: its database and its events table, never another
    table, and ``default`` only for the Hive client's start-up lookup/creation
    (tests/infra/constructs/test_events_table.py has the exact statements)."""
    config = synthesized.config(name)
    job_role = synthesized.role_assumed_by(name, "ec2.amazonaws.com")
    glue = [s for s in _policies(synthesized, name, job_role) if _actions(s)[0].startswith("glue:")]
    assert glue
    for statement in glue:
        for resource in statement["Resource"]:
            tail = resource["Fn::Join"][1][-1]
            assert tail in (
                ":catalog",
                f":database/{config.database_name}",
                f":table/{config.database_name}/{contract.EVENTS_TABLE}",
                ":database/default",
            )
            if tail == ":database/default":
                assert set(_actions(statement)) == {"glue:GetDatabase", "glue:CreateDatabase"}


# ------------------------------------------------------------------------ alarms


def _alarms(synth: Synthesized, name: str) -> dict[str, dict[str, Any]]:
    return {
        alarm["Properties"]["AlarmName"].removeprefix(f"{name}-"): alarm["Properties"]
        for alarm in synth.resources(name, "AWS::CloudWatch::Alarm").values()
    }


@pytest.mark.parametrize("name", ALL)
def test_alarm_topic_encrypted_tls_only_with_subscriptions(
    synthesized: Synthesized, name: str
) -> None:
    topic_id, topic = synthesized.one(name, "AWS::SNS::Topic")
    assert "KmsMasterKeyId" in topic["Properties"]
    policy = _props(synthesized, name, "AWS::SNS::TopicPolicy")
    denies = [s for s in policy["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert denies[0]["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert denies[0]["Action"] == "sns:Publish"
    emails = synthesized.config(name).alarms.emails
    subscriptions = synthesized.templates[name]["Resources"].values()
    endpoints = [
        r["Properties"]["Endpoint"]
        for r in subscriptions
        if r["Type"] == "AWS::SNS::Subscription" and r["Properties"]["Protocol"] == "email"
    ]
    assert endpoints == list(emails)
    for alarm in _alarms(synthesized, name).values():
        assert alarm["AlarmActions"] == [{"Ref": topic_id}]


def test_orders_eu_has_no_email_subscription(synthesized: Synthesized) -> None:
    resources = synthesized.templates[ORDERS_EU]["Resources"].values()
    assert not [r for r in resources if r["Type"] == "AWS::SNS::Subscription"]


@pytest.mark.parametrize("name", ALL)
def test_delay_alarms_watch_the_contract_metrics(synthesized: Synthesized, name: str) -> None:
    config = synthesized.config(name)
    alarms = _alarms(synthesized, name)
    assert set(alarms) == {
        "ConsumerLag",
        "SourceLag",
        "FallingBehind",
        "EndToEndLatency",
        "SchedulingDelay",
        "FailureRecords",
        "HeartbeatMissing",
        "SupervisorGaveUp",
        # The supervisor's own function (infra/supervisor/construct.py).
        *(("SupervisorErrors", "SupervisorNotRunning") if config.supervisor.enabled else ()),
    }
    lag = alarms["ConsumerLag"]
    assert (lag["Namespace"], lag["MetricName"]) == (
        "AWS/Kinesis",
        "GetRecords.IteratorAgeMilliseconds",
    )
    assert lag["Dimensions"] == [{"Name": "StreamName", "Value": {"Ref": STREAM_LOGICAL_ID}}]
    dims = [{"Name": contract.INSTANCE_DIMENSION, "Value": config.instance_id}]
    expected = {
        "SourceLag": contract.SOURCE_LAG_MS,
        "FallingBehind": contract.BATCH_DURATION_MS,
        "EndToEndLatency": contract.END_TO_END_LATENCY_MS,
        "SchedulingDelay": contract.SCHEDULING_DELAY_RATIO,
        "FailureRecords": contract.FAILURE_RECORDS,
        "HeartbeatMissing": contract.HEARTBEAT,
        "SupervisorGaveUp": contract.SUPERVISOR_GAVE_UP,
    }
    for alarm_name, metric in expected.items():
        alarm = alarms[alarm_name]
        assert alarm["Namespace"] == contract.metric_namespace(config.instance_id)
        assert alarm["MetricName"] == metric
        assert alarm["Dimensions"] == dims
        assert alarm["Period"] == config.alarms.period_sec

    behind = alarms["FallingBehind"]
    assert behind["Threshold"] == config.job.trigger_interval_sec * 1000
    assert behind["ComparisonOperator"] == "GreaterThanThreshold"
    assert behind["DatapointsToAlarm"] == config.alarms.batch_duration_datapoints
    assert behind["EvaluationPeriods"] == config.alarms.batch_duration_evaluation_periods
    assert behind["DatapointsToAlarm"] < behind["EvaluationPeriods"]  # N of M
    assert alarms["EndToEndLatency"]["Threshold"] == config.alarms.end_to_end_latency_ms
    assert alarms["SchedulingDelay"]["Threshold"] == config.alarms.scheduling_delay_ratio
    assert alarms["FailureRecords"]["Threshold"] == config.alarms.failure_records
    assert lag["Threshold"] == config.alarms.iterator_age_ms
    heartbeat = alarms["HeartbeatMissing"]
    assert heartbeat["TreatMissingData"] == "breaching"
    assert heartbeat["ComparisonOperator"] == "LessThanThreshold"
    for alarm_name, alarm in alarms.items():
        # Both "stopped publishing" alarms breach on missing data.
        if alarm_name not in ("HeartbeatMissing", "SupervisorNotRunning"):
            assert alarm["TreatMissingData"] == "notBreaching"


def test_thresholds_are_per_instance(synthesized: Synthesized) -> None:
    assert _alarms(synthesized, PAYMENTS_AP)["FallingBehind"]["Threshold"] == 5000
    assert _alarms(synthesized, ORDERS_AP)["FallingBehind"]["Threshold"] == 10000
    assert _alarms(synthesized, PAYMENTS_AP)["EndToEndLatency"]["Threshold"] == 30000


@pytest.mark.parametrize("name", ALL)
def test_emr_failures_reach_the_alarm_topic(synthesized: Synthesized, name: str) -> None:
    topic_id, _ = synthesized.one(name, "AWS::SNS::Topic")
    cluster_id, _ = synthesized.one(name, "AWS::EMR::Cluster")
    # The one rule with an event pattern (the supervisor's schedule is the other).
    ((rule_id, rule),) = [
        (logical_id, r["Properties"])
        for logical_id, r in synthesized.resources(name, "AWS::Events::Rule").items()
        if "EventPattern" in r["Properties"]
    ]
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["aws.emr"]
    assert set(pattern["detail-type"]) == {"EMR Step Status Change", "EMR Cluster State Change"}
    assert pattern["detail"]["clusterId"] == [{"Ref": cluster_id}]
    assert {"FAILED", "TERMINATED_WITH_ERRORS"} <= set(pattern["detail"]["state"])
    assert [t["Arn"] for t in rule["Targets"]] == [{"Ref": topic_id}]
    policy = _props(synthesized, name, "AWS::SNS::TopicPolicy")
    (events,) = [
        s
        for s in policy["PolicyDocument"]["Statement"]
        if s["Effect"] == "Allow" and s["Principal"] == {"Service": "events.amazonaws.com"}
    ]
    assert events["Condition"]["ArnEquals"] == {"aws:SourceArn": [{"Fn::GetAtt": [rule_id, "Arn"]}]}
    assert rule["Name"] == f"{name}-EmrFailures"


def _service_statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        s
        for s in document["Statement"]
        if s["Effect"] == "Allow" and "Service" in s.get("Principal", {})
    ]


@pytest.mark.parametrize("name", ALL)
def test_services_use_the_alarm_topic_and_key_for_this_instance_only(
    synthesized: Synthesized, name: str
) -> None:
    """CloudWatch and EventBridge may publish to the alarm topic and use its
    key for this instance's alarms and rule, in this account (aws:SourceArn,
    aws:SourceAccount), never for anything else."""
    topic_policy = _props(synthesized, name, "AWS::SNS::TopicPolicy")["PolicyDocument"]
    key_id = _props(synthesized, name, "AWS::SNS::Topic")["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key_policy = synthesized.properties(name, key_id)["KeyPolicy"]
    alarm_names = {alarm["AlarmName"] for alarm in _alarms(synthesized, name).values()}
    # The key is the stack's (infra/constructs/logs_key.py): CloudWatch Logs'
    # statement there is for the log groups (tests/infra/stacks/test_first_deploy.py).
    key_statements = [
        s for s in _service_statements(key_policy) if s.get("Sid") != "CloudWatchLogsUse"
    ]
    statements = _service_statements(topic_policy) + key_statements
    services = sorted(s["Principal"]["Service"] for s in statements)
    assert services == ["cloudwatch.amazonaws.com"] * 2 + ["events.amazonaws.com"] * 2
    for statement in statements:
        condition = statement["Condition"]
        assert condition["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
        sources = [_text(arn) for arn in condition["ArnEquals"]["aws:SourceArn"]]
        assert "*" not in "".join(sources)
        if statement["Principal"]["Service"] == "cloudwatch.amazonaws.com":
            named = {text.split(":alarm:")[1].rstrip('"]}') for text in sources}
            assert named == alarm_names


@pytest.mark.parametrize("name", ALL)
def test_dashboard_shows_the_delay_metrics(synthesized: Synthesized, name: str) -> None:
    dashboard = _props(synthesized, name, "AWS::CloudWatch::Dashboard")
    assert dashboard["DashboardName"] == name
    body = _text(dashboard["DashboardBody"])
    for metric in (
        contract.BATCH_DURATION_MS,
        contract.END_TO_END_LATENCY_MS,
        contract.SCHEDULING_DELAY_RATIO,
        contract.SOURCE_LAG_MS,
        contract.FAILURE_RECORDS,
        contract.HEARTBEAT,
        "GetRecords.IteratorAgeMilliseconds",
    ):
        assert metric in body, metric


@pytest.mark.parametrize("name", ALL)
def test_outputs_point_at_the_instance_resources(synthesized: Synthesized, name: str) -> None:
    outputs = synthesized.templates[name]["Outputs"]
    cluster_id, _ = synthesized.one(name, "AWS::EMR::Cluster")
    assert outputs["StreamName"]["Value"] == {"Ref": STREAM_LOGICAL_ID}
    assert outputs["DataBucketName"]["Value"] == {"Ref": DATA_BUCKET_LOGICAL_ID}
    assert outputs["FailureTopicArn"]["Value"] == {"Fn::GetAtt": ["FailureTopic", "TopicArn"]}
    assert outputs["EmrClusterId"]["Value"] == {"Ref": cluster_id}
    assert outputs["GlueDatabaseName"]["Value"] == synthesized.config(name).database_name


@pytest.mark.parametrize("name", ALL)
def test_flow_log_role_is_for_this_accounts_flow_logs_only(
    synthesized: Synthesized, name: str
) -> None:
    flows = synthesized.resources(name, "AWS::EC2::FlowLog")
    for flow in flows.values():
        role_id = flow["Properties"]["DeliverLogsPermissionArn"]["Fn::GetAtt"][0]
        (trust,) = synthesized.properties(name, role_id)["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "vpc-flow-logs.amazonaws.com"}
        assert trust["Condition"]["StringEquals"] == {
            "aws:SourceAccount": {"Ref": "AWS::AccountId"}
        }
        assert _text(trust["Condition"]["ArnLike"]["aws:SourceArn"]).endswith(':vpc-flow-log/*"]]}')
