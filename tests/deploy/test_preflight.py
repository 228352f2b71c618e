"""``make preflight`` (``python -m scripts.preflight``): each check passes and
fails where it should, against moto where moto implements the API (a moto
server for the command as a child process, ``mock_aws`` in process) and a stub
client where a response shape moto does not produce is needed. Nothing here
reaches a real endpoint: the child gets ``--endpoint-url``, the rest moto or stubs."""

from __future__ import annotations

import copy
import datetime
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from infra.config import InstanceConfig, load_instances, read_cdk_context
from scripts import certs, preflight
from scripts.preflight_quotas import ELASTIC_IPS, ON_DEMAND_STANDARD, VPCS_PER_REGION
from tests.deploy.preflight_fakes import FakeServiceQuotas
from tests.fixtures import EXAMPLE_CDK_JSON

REPO = Path(__file__).resolve().parents[2]
TLS = "s3://tls-bucket/tls/orders-eu-west-1/certificates.zip"
MSK_ARN = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"


def _cdk_json(tmp_path: Path, **instance: Any) -> Path:
    raw = json.loads(EXAMPLE_CDK_JSON.read_text(encoding="utf-8"))
    raw["context"]["streaming"]["defaults"] = {"emr": {"tls_certificates_s3_uri": TLS}}
    raw["context"]["streaming"]["instances"] = [
        {"domain": "orders", "region": "eu-west-1", "stream": {"shard_count": 2}, **instance}
    ]
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _config(**instance: Any) -> InstanceConfig:
    context = copy.deepcopy(dict(read_cdk_context(EXAMPLE_CDK_JSON)))
    context["streaming"]["defaults"] = {"emr": {"tls_certificates_s3_uri": TLS}}
    context["streaming"]["instances"] = [{"domain": "orders", "region": "eu-west-1", **instance}]
    return load_instances(context)[0]


# ------------------------------------------------------------------ the command


def test_the_command_reports_each_check_with_its_fix(moto_url: str, tmp_path: Path) -> None:
    cdk_json = _cdk_json(tmp_path)

    def preflight_run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "scripts.preflight", "--instance", "orders-eu-west-1",
             "--cdk-json", str(cdk_json), "--endpoint-url", moto_url],
            cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    first = preflight_run()
    assert first.returncode == 1, first.stderr
    lines = first.stdout.splitlines()
    assert any(line.startswith("FAIL  TLS certificate zip: s3://tls-bucket/") for line in lines)
    assert "      fix: make certs INSTANCE=orders-eu-west-1, then set" in first.stdout
    assert any(line.startswith("FAIL  Glue default database") for line in lines)
    assert "aws glue create-database --region eu-west-1 --database-input Name=default" in (
        first.stdout
    )
    assert any(line.startswith("PASS  availability zones") for line in lines)
    assert any(
        line.startswith("PASS  Kinesis source: python-kinesis on emr-spark-8.1.0 (")
        for line in lines
    )
    assert any(line.startswith("PASS  Lake Formation: IAM alone controls") for line in lines)
    assert any(line.startswith("PASS  imported MSK cluster: the stack creates") for line in lines)
    assert any(
        line.startswith(
            "PASS  failure record size: producer message.max.bytes 1,000,000, topic "
            "max.message.bytes 1,048,588 (from kafka.max_message_bytes 1,000,000)"
        )
        for line in lines
    )
    assert any(line.startswith("PASS  Kinesis capacity: 2 shards needed") for line in lines)
    assert any(
        line.startswith("PASS  EMR release label: emr-spark-8.1.0 is available") for line in lines
    )
    assert lines[0] == (
        "FAIL  CDK bootstrap: eu-west-1 is not bootstrapped for the CDK: no SSM parameter "
        "/cdk-bootstrap/hnb659fds/version (the CDKToolkit stack writes it); cdk deploy would "
        "stop before any resource"
    )
    assert (
        "      fix: bootstrap each target region once: npx cdk bootstrap aws://<account>/eu-west-1"
        in (first.stdout)
    )
    assert any(line.startswith("PASS  left-behind resources: stack Streaming-") for line in lines)
    assert "PASS  deployed record: not deployed: nothing to record" in lines
    assert "PASS  VPC quota: the stack creates 1 more; 1 of 5 VPCs in use (L-F678F1CE)" in lines

    s3 = boto3.client("s3", region_name="eu-west-1", endpoint_url=moto_url)
    s3.create_bucket(
        Bucket="tls-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    s3.put_object(
        Bucket="tls-bucket",
        Key="tls/orders-eu-west-1/certificates.zip",
        Body=certs.certificate_zip("eu-west-1", days=2),
    )
    glue = boto3.client("glue", region_name="eu-west-1", endpoint_url=moto_url)
    glue.create_database(DatabaseInput={"Name": "default"})
    ssm = boto3.client("ssm", region_name="eu-west-1", endpoint_url=moto_url)
    ssm.put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")

    second = preflight_run()
    assert (
        "PASS  TLS certificate zip: s3://tls-bucket/tls/orders-eu-west-1/certificates.zip: "
        "certificateChain.pem names *.eu-west-1.compute.internal, which covers eu-west-1"
    ) in second.stdout
    assert "PASS  Glue default database" in second.stdout
    assert "PASS  CDK bootstrap: eu-west-1 is bootstrapped (version 30" in second.stdout
    # moto's Service Quotas has no ec2 codes (NoSuchResourceException, and no
    # GetAWSDefaultServiceQuota): the two EC2 quota checks cannot pass against
    # it, and fail as an unreadable quota does (tests/deploy/test_preflight_quotas.py
    # covers them with a fake).
    failed = [line for line in second.stdout.splitlines() if line.startswith("FAIL")]
    assert [line.split(":")[0] for line in failed] == [
        "FAIL  EC2 vCPU quota",
        "FAIL  Elastic IP quota",
    ]
    assert all("GetAWSDefaultServiceQuota ec2/L-" in line for line in failed)
    assert "preflight orders-eu-west-1: 13 passed, 0 warning(s), 2 failed" in second.stdout
    assert second.returncode == 1


def test_unknown_instance_is_a_usage_error(tmp_path: Path) -> None:
    assert (
        preflight.main(["--instance", "x-eu-west-1", "--cdk-json", str(_cdk_json(tmp_path))]) == 2
    )


# ------------------------------------------------------------------ stubs


class Stub:
    """Answers one method with a canned response (or raises it); keeps the
    keyword arguments of each call in ``calls``."""

    def __init__(self, **responses: Any) -> None:
        self.responses = responses
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        response = self.responses[name]

        def call(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            if isinstance(response, Exception):
                raise response
            return response() if callable(response) else response

        return call


def _access_denied(operation: str) -> ClientError:
    error = {"Code": "AccessDeniedException", "Message": "User is not authorized"}
    return ClientError({"Error": error}, operation)


class Ec2Stub(Stub):
    """A Stub whose paginators yield the canned response as one page."""

    def get_paginator(self, operation: str) -> Any:
        page = self.responses[operation]
        return SimpleNamespace(paginate=lambda **kwargs: [page])


class EntityNotFoundError(ClientError):
    pass


class GlueStub:
    """The account's Data Catalog holds the ``default`` database only."""

    exceptions = SimpleNamespace(EntityNotFoundException=EntityNotFoundError)

    def get_database(self, Name: str) -> Any:  # noqa: N803 (boto3's keyword)
        if Name == "default":
            return {"Database": {"Name": "default"}}
        raise EntityNotFoundError({"Error": {"Code": "EntityNotFoundException"}}, "GetDatabase")


IAM_ONLY = [
    {"Principal": {"DataLakePrincipalIdentifier": "IAM_ALLOWED_PRINCIPALS"}, "Permissions": ["ALL"]}
]


def _healthy_clients(config: InstanceConfig) -> dict[str, Any]:
    """Stubs every check passes with (for ``config``'s region)."""
    zipped = certs.certificate_zip(config.region, days=2)
    return {
        "emr": Stub(list_release_labels={"ReleaseLabels": [config.emr.release_label]}),
        "s3": Stub(get_object=lambda: {"Body": io.BytesIO(zipped)}),
        "sts": Stub(get_caller_identity={"Account": "123456789012"}),
        "ec2": Ec2Stub(
            describe_availability_zones={
                "AvailabilityZones": [{"ZoneName": f"{config.region}{z}"} for z in "abc"]
            },
            describe_instances={"Reservations": []},
            describe_vpcs={"Vpcs": [{"VpcId": "vpc-default"}]},
            describe_addresses={"Addresses": []},
        ),
        "kafka": Stub(list_clusters_v2={"ClusterInfoList": []}),
        "glue": GlueStub(),
        "lakeformation": Stub(
            get_data_lake_settings={
                "DataLakeSettings": {
                    "CreateDatabaseDefaultPermissions": IAM_ONLY,
                    "CreateTableDefaultPermissions": IAM_ONLY,
                }
            }
        ),
        "kinesis": Stub(describe_limits={"OpenShardCount": 0, "ShardLimit": 500,
                                         "OnDemandStreamCount": 0, "OnDemandStreamCountLimit": 50},
                        describe_stream_summary=_not_found("DescribeStreamSummary")),
        "cloudformation": Stub(describe_stacks=ClientError(
            {"Error": {"Code": "ValidationError", "Message": "Stack with id x does not exist"}},
            "DescribeStacks")),
        "logs": Stub(describe_log_groups={"logGroups": []}),
        "service-quotas": FakeServiceQuotas(
            applied={ON_DEMAND_STANDARD: 64, VPCS_PER_REGION: 5, ELASTIC_IPS: 5}
        ),
    }  # fmt: skip


def _not_found(operation: str) -> ClientError:
    return ClientError({"Error": {"Code": "ResourceNotFoundException"}}, operation)


def test_release_label_passes_when_the_region_lists_it() -> None:
    clients = {"emr": Stub(list_release_labels={"ReleaseLabels": ["emr-spark-8.1.0"]})}
    assert preflight.check_release_label(_config(), clients).ok


def test_release_label_missing_in_the_region_fails_with_the_fix() -> None:
    clients = {"emr": Stub(list_release_labels={"ReleaseLabels": ["emr-7.10.0"]})}
    result = preflight.check_release_label(_config(), clients)
    assert not result.ok
    assert "emr-spark-8.1.0 is not offered in eu-west-1 (found: emr-7.10.0)" in result.detail
    assert "infra/releases.py" in result.fix


def test_placeholder_tls_uri_fails_without_a_call() -> None:
    config = _config(
        emr={
            "tls_certificates_s3_uri": "s3://example-emr-tls-certificates/streaming/certificates.zip"
        }
    )
    result = preflight.check_tls_object(config, {})
    assert not result.ok and "make certs INSTANCE=orders-eu-west-1" in result.fix


def _msk(**provisioned: Any) -> dict[str, Any]:
    base = {
        "CurrentBrokerSoftwareInfo": {"KafkaVersion": "3.6.0"},
        "ClientAuthentication": {"Sasl": {"Iam": {"Enabled": True}}},
        "NumberOfBrokerNodes": 3,
    }
    return {
        "ClusterInfo": {
            "ClusterType": "PROVISIONED",
            "State": "ACTIVE",
            "Provisioned": {**base, **provisioned},
        }
    }


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        (_msk(), None),
        (_msk(CurrentBrokerSoftwareInfo={"KafkaVersion": "3.5.1"}), "Kafka 3.5.1 (needs >= 3.6)"),
        (
            _msk(ClientAuthentication={"Sasl": {"Scram": {"Enabled": True}}}),
            "IAM client authentication off",
        ),
        (_msk(NumberOfBrokerNodes=2), "2 brokers < kafka.topic_replication_factor 3"),
        ({"ClusterInfo": {"ClusterType": "SERVERLESS", "State": "ACTIVE"}}, "type SERVERLESS"),
    ],
)
def test_imported_msk_cluster(response: dict[str, Any], problem: str | None) -> None:
    config = _config(kafka={"cluster_arn": MSK_ARN})
    result = preflight.check_msk_cluster(config, {"kafka": Stub(describe_cluster_v2=response)})
    assert result.ok is (problem is None)
    if problem:
        assert problem in result.detail and "IAM client auth" in result.fix


def test_the_failure_record_size_passes_when_producer_and_topic_agree() -> None:
    result = preflight.check_failure_message_size(_config(kafka={"max_message_bytes": 500_000}), {})
    assert result.status == "PASS"
    assert "producer message.max.bytes 500,000, topic max.message.bytes 548,588" in result.detail


def test_a_topic_below_the_producer_fails_naming_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from infra.constructs import failure_topic

    real = failure_topic.topic_configs
    monkeypatch.setattr(
        failure_topic,
        "topic_configs",
        lambda config: {**real(config), "max.message.bytes": "900000"},
    )
    result = preflight.check_failure_message_size(_config(), {})
    assert result.status == "FAIL"
    assert result.detail.startswith("kafka.max_message_bytes: the producer's message.max.bytes")
    assert "app.failure_limits" in result.fix


def _configured_cluster(properties: bytes) -> Stub:
    return Stub(
        describe_cluster_v2=_msk(
            CurrentBrokerSoftwareInfo={
                "KafkaVersion": "3.6.0",
                "ConfigurationArn": "arn:aws:kafka:eu-west-1:123456789012:configuration/c/1",
                "ConfigurationRevision": 2,
            }
        ),
        describe_configuration_revision={"ServerProperties": properties},
    )


def test_an_imported_cluster_with_a_lower_broker_limit_is_a_warning() -> None:
    config = _config(kafka={"cluster_arn": MSK_ARN})
    kafka = _configured_cluster(b"auto.create.topics.enable=false\nmessage.max.bytes=500000\n")
    result = preflight.check_failure_message_size(config, {"kafka": kafka})
    assert result.status == "WARN"
    assert "sets message.max.bytes=500,000, below the topic's" in result.detail
    assert kafka.calls[-1] == (
        "describe_configuration_revision",
        {"Arn": "arn:aws:kafka:eu-west-1:123456789012:configuration/c/1", "Revision": 2},
    )
    fine = _configured_cluster(b"message.max.bytes=2000000\n")
    assert preflight.check_failure_message_size(config, {"kafka": fine}).status == "PASS"
    default = Stub(describe_cluster_v2=_msk())
    assert preflight.check_failure_message_size(config, {"kafka": default}).status == "PASS"
    denied = Stub(describe_cluster_v2=ClientError({"Error": {"Code": "AccessDenied"}}, "x"))
    unread = preflight.check_failure_message_size(config, {"kafka": denied})
    assert unread.status == "WARN" and "kafka:DescribeConfigurationRevision" in unread.fix


def test_shard_quota_without_room_fails() -> None:
    limits = {"ShardLimit": 10, "OpenShardCount": 9}
    result = preflight.check_shard_quota(
        _config(stream={"shard_count": 2}), {"kinesis": Stub(describe_limits=limits)}
    )
    assert not result.ok and "2 shards needed, 1 free" in result.detail


def test_an_api_error_is_a_fail_naming_the_permission() -> None:
    result = preflight.check_shard_quota(
        _config(), {"kinesis": Stub(describe_limits=RuntimeError("AccessDenied"))}
    )
    assert not result.ok and "kinesis:DescribeLimits" in result.fix


# ------------------------------------------------------------------ moto in process


@mock_aws
def test_imported_vpc_needs_nat_or_the_endpoints() -> None:
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.1.{i}.0/24", AvailabilityZone=f"eu-west-1{z}")[
            "Subnet"
        ]["SubnetId"]
        for i, z in enumerate("abc")
    ]
    config = _config(
        network={
            "vpc_id": vpc,
            "private_subnet_ids": subnets,
            "availability_zones": ["eu-west-1a", "eu-west-1b", "eu-west-1c"],
        }
    )
    result = preflight.check_network(config, {"ec2": ec2})
    assert not result.ok
    assert (
        "no NAT gateway and no endpoint for s3, kinesis-streams, glue, monitoring, sts"
        in result.detail
    )
    assert "com.amazonaws.eu-west-1.kinesis-streams" in result.fix
    for service in preflight.ENDPOINT_SERVICES:
        ec2.create_vpc_endpoint(VpcId=vpc, ServiceName=f"com.amazonaws.eu-west-1.{service}")
    assert preflight.check_network(config, {"ec2": ec2}).ok


@mock_aws
def test_created_vpc_zones_must_exist() -> None:
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    assert preflight.check_network(_config(), {"ec2": ec2}).ok
    bad = _config(network={"availability_zones": ["eu-west-1a", "eu-west-1b", "eu-west-1z"]})
    result = preflight.check_network(bad, {"ec2": ec2})
    assert not result.ok and "not ['eu-west-1z']" in result.detail


def test_output_format_prints_pass_fail_and_fix() -> None:
    out = io.StringIO()
    config = _config()
    clients = {
        **_healthy_clients(config),
        "kinesis": Stub(
            describe_limits={"OnDemandStreamCount": 50, "OnDemandStreamCountLimit": 50},
            describe_stream_summary=_not_found("DescribeStreamSummary"),
        ),
    }
    assert preflight.run_checks(config, clients, out) == 1
    text = out.getvalue()
    assert (
        "FAIL  Kinesis capacity: 50 of 50 on-demand streams in use\n      fix: request a higher"
        in text
    )
    assert text.count("PASS  ") == 13
    assert "preflight orders-eu-west-1: 13 passed, 0 warning(s), 1 failed" in text


# ------------------------------------------------------------------ Kinesis source


def test_the_release_default_source_passes_with_its_reason() -> None:
    result = preflight.check_kinesis_source(_config(), {})
    assert result.status == "PASS"
    assert result.detail.startswith(
        "python-kinesis on emr-spark-8.1.0 (emr-spark-8.1.0's default: "
    )
    assert "not listed on this release's page" in result.detail


def test_the_connector_on_a_python_default_release_is_a_warning_that_does_not_fail() -> None:
    config = _config(job={"source": {"format": "aws-kinesis"}})
    result = preflight.check_kinesis_source(config, {})
    assert result.status == "WARN" and result.ok
    assert "aws-kinesis on emr-spark-8.1.0, whose default is python-kinesis" in result.detail
    assert "Spark 4.1 build is unreleased" in result.detail
    assert "spark-sql-kinesis-connector/pull/87" in result.detail
    assert "ls /usr/share/aws/kinesis/spark-sql-kinesis/lib/ on a cluster node" in result.fix

    out = io.StringIO()
    assert preflight.run_checks(config, _healthy_clients(config), out) == 0
    text = out.getvalue()
    assert "WARN  Kinesis source: aws-kinesis on emr-spark-8.1.0" in text
    assert "\n      check: after the deploy, run ls /usr/share/aws/kinesis/" in text
    assert "preflight orders-eu-west-1: 13 passed, 1 warning(s), 0 failed" in text


# ------------------------------------------------------------------ TLS certificate names


def _zip_of(certificate_pem: bytes, *, members: tuple[str, ...] = ("privateKey.pem",)) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("certificateChain.pem", certificate_pem)
        for member in members:
            archive.writestr(member, b"-----BEGIN PRIVATE KEY-----\n")
    return buffer.getvalue()


def _certificate(common_name: str, dns_names: list[str]) -> bytes:
    """A self-signed certificate with ``dns_names`` as its SANs (none: no SAN extension)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if dns_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
        )
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def _tls_check(config: InstanceConfig, zipped: bytes) -> tuple[preflight.Result, Stub]:
    s3 = Stub(get_object=lambda: {"Body": io.BytesIO(zipped)})
    sts = Stub(get_caller_identity={"Account": "123456789012"})
    return preflight.check_tls_object(config, {"s3": s3, "sts": sts}), s3


def test_a_certificate_from_make_certs_covers_its_region_and_is_read_from_our_bucket() -> None:
    result, s3 = _tls_check(_config(), certs.certificate_zip("eu-west-1", days=2))
    assert result.status == "PASS"
    assert "certificateChain.pem names *.eu-west-1.compute.internal, which covers eu-west-1" in (
        result.detail
    )
    assert s3.calls == [
        (
            "get_object",
            {
                "Bucket": "tls-bucket",
                "Key": "tls/orders-eu-west-1/certificates.zip",
                "ExpectedBucketOwner": "123456789012",
            },
        )
    ]


def test_the_account_in_cdk_json_is_the_expected_bucket_owner_without_sts() -> None:
    config = _config(account="210987654321")
    s3 = Stub(get_object=lambda: {"Body": io.BytesIO(certs.certificate_zip("eu-west-1", days=2))})
    assert preflight.check_tls_object(config, {"s3": s3}).ok
    assert s3.calls[0][1]["ExpectedBucketOwner"] == "210987654321"


def test_a_certificate_for_another_region_fails_naming_region_and_names() -> None:
    """cdk.json's defaults give one TLS URI to ap-northeast-2 and eu-west-1
    instances: a zip made for one region does not serve the other."""
    result, _ = _tls_check(_config(), certs.certificate_zip("ap-northeast-2", days=2))
    assert result.status == "FAIL"
    assert (
        "certificateChain.pem names *.ap-northeast-2.compute.internal (subject alternative "
        "names); EMR nodes in eu-west-1 are *.eu-west-1.compute.internal, which none of them "
        "covers"
    ) in result.detail
    assert "one certificate serves several regions only if its names cover all of them" in (
        result.fix
    )
    assert "give orders-eu-west-1 a zip of its own (make certs INSTANCE=orders-eu-west-1" in (
        result.fix
    )


def test_one_certificate_may_serve_several_regions_when_it_names_each() -> None:
    both = _certificate(
        "streaming", ["*.ap-northeast-2.compute.internal", "*.eu-west-1.compute.internal"]
    )
    for region in ("ap-northeast-2", "eu-west-1"):
        result, _ = _tls_check(_config(region=region), _zip_of(both))
        assert result.status == "PASS", result.detail
        assert f"which covers {region} (*.{region}.compute.internal)" in result.detail
    result, _ = _tls_check(_config(region="us-east-1"), _zip_of(both))
    assert result.status == "FAIL" and "us-east-1 are *.ec2.internal" in result.detail


@pytest.mark.parametrize(
    ("common_name", "sans", "region", "covered"),
    [
        ("*.ec2.internal", [], "us-east-1", True),  # no SAN: the common name counts
        ("*.EU-WEST-1.compute.internal.", [], "eu-west-1", True),  # case and root dot
        ("*.eu-west-1.compute.internal", ["streaming.example.com"], "eu-west-1", False),
        ("x", ["*.compute.internal"], "eu-west-1", False),  # a wildcard covers one label
    ],
)
def test_which_names_cover_a_region(
    common_name: str, sans: list[str], region: str, covered: bool
) -> None:
    names, origin = preflight.tls_zip_names(_zip_of(_certificate(common_name, sans)))
    assert origin == ("subject alternative names" if sans else "common name")
    assert preflight.covers_region(names, region) is covered


@pytest.mark.parametrize(
    ("zipped", "problem"),
    [
        (b"zip", "not a zip archive"),
        (
            _zip_of(b"x", members=()),
            "no privateKey.pem in the zip (it holds: certificateChain.pem)",
        ),
        (_zip_of(b"not a pem"), "certificateChain.pem holds no readable PEM certificate"),
    ],
)
def test_a_zip_emr_cannot_load_fails(zipped: bytes, problem: str) -> None:
    result, _ = _tls_check(_config(), zipped)
    assert result.status == "FAIL" and problem in result.detail
    assert "make certs INSTANCE=orders-eu-west-1" in result.fix


def test_a_refused_read_names_the_expected_owner() -> None:
    s3 = Stub(get_object=_access_denied("GetObject"))
    sts = Stub(get_caller_identity={"Account": "123456789012"})
    result = preflight.check_tls_object(_config(), {"s3": s3, "sts": sts})
    assert result.status == "FAIL" and "AccessDenied" in result.detail
    assert "the bucket must belong to account 123456789012" in result.fix


# ------------------------------------------------------------------ Lake Formation


def _put_settings(database_defaults: Any, table_defaults: Any) -> None:
    boto3.client("lakeformation", region_name="eu-west-1").put_data_lake_settings(
        DataLakeSettings={
            "DataLakeAdmins": [],
            "CreateDatabaseDefaultPermissions": database_defaults,
            "CreateTableDefaultPermissions": table_defaults,
        }
    )


def _lake_formation(config: InstanceConfig) -> preflight.Result:
    clients = {
        "lakeformation": boto3.client("lakeformation", region_name="eu-west-1"),
        "glue": boto3.client("glue", region_name="eu-west-1"),
    }
    return preflight.check_lake_formation(config, clients)


@mock_aws
def test_an_iam_only_catalog_passes() -> None:
    _put_settings(IAM_ONLY, IAM_ONLY)
    result = _lake_formation(_config())
    assert result.status == "PASS" and "IAM alone controls" in result.detail


@mock_aws
def test_a_catalog_lake_formation_governs_fails_until_the_option_is_on() -> None:
    _put_settings([], [])
    result = _lake_formation(_config())
    assert result.status == "FAIL"
    assert "Lake Formation governs new databases, new tables" in result.detail
    assert result.fix == (
        'set "lake_formation_permissions": true in the orders-eu-west-1 entry of cdk.json'
    )
    on = _lake_formation(_config(lake_formation_permissions=True))
    assert on.status == "PASS" and "lake_formation_permissions is on" in on.detail


@mock_aws
def test_an_existing_database_without_iam_only_defaults_is_governed() -> None:
    _put_settings(IAM_ONLY, IAM_ONLY)
    config = _config()
    glue = boto3.client("glue", region_name="eu-west-1")
    glue.create_database(
        DatabaseInput={"Name": config.database_name, "CreateTableDefaultPermissions": []}
    )
    result = _lake_formation(config)
    assert result.status == "FAIL"
    assert f"Lake Formation governs new tables in {config.database_name}" in result.detail


def test_governance_is_read_from_both_defaults() -> None:
    assert preflight.lake_formation_governs({}, None) == ["new databases", "new tables"]
    half = {"CreateDatabaseDefaultPermissions": IAM_ONLY, "CreateTableDefaultPermissions": []}
    assert preflight.lake_formation_governs(half, None) == ["new tables"]
    select_only = [{**IAM_ONLY[0], "Permissions": ["SELECT"]}]
    both = {"CreateDatabaseDefaultPermissions": IAM_ONLY, "CreateTableDefaultPermissions": IAM_ONLY}
    assert preflight.lake_formation_governs(both, {"Name": "db"}) == []  # no field: no opinion
    assert preflight.lake_formation_governs(
        both, {"Name": "db", "CreateTableDefaultPermissions": select_only}
    ) == ["new tables in db"]


def test_access_denied_on_the_settings_is_a_clear_fail() -> None:
    clients = {"lakeformation": Stub(get_data_lake_settings=_access_denied("GetDataLakeSettings"))}
    result = preflight.check_lake_formation(_config(), clients)
    assert result.status == "FAIL"
    assert "refused (access denied)" in result.detail and "is unknown" in result.detail
    assert "lakeformation:GetDataLakeSettings" in result.fix
    assert '"lake_formation_permissions": true' in result.fix
