"""``make preflight`` (``python -m scripts.preflight``): each check passes and
fails where it should, against moto where moto implements the API (a moto
server for the command as a child process, ``mock_aws`` in process) and a stub
client where a response shape moto does not produce is needed. Nothing here
reaches a real endpoint: the child gets ``--endpoint-url``, the rest moto or stubs."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra.config import InstanceConfig, load_instances, read_cdk_context
from scripts import preflight

REPO = Path(__file__).resolve().parents[2]
TLS = "s3://tls-bucket/tls/orders-eu-west-1/certificates.zip"
MSK_ARN = "arn:aws:kafka:eu-west-1:123456789012:cluster/failures/0b1c2d3e-1111-2222"


def _cdk_json(tmp_path: Path, **instance: Any) -> Path:
    raw = json.loads((REPO / "cdk.json").read_text(encoding="utf-8"))
    raw["context"]["streaming"]["defaults"] = {"emr": {"tls_certificates_s3_uri": TLS}}
    raw["context"]["streaming"]["instances"] = [
        {"domain": "orders", "region": "eu-west-1", "stream": {"shard_count": 2}, **instance}
    ]
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _config(**instance: Any) -> InstanceConfig:
    context = copy.deepcopy(dict(read_cdk_context(REPO / "cdk.json")))
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
    assert any(line.startswith("PASS  imported MSK cluster: the stack creates") for line in lines)
    assert any(line.startswith("PASS  Kinesis capacity: 2 shards needed") for line in lines)
    assert any(
        line.startswith("PASS  EMR release label: emr-spark-8.1.0 is available") for line in lines
    )

    s3 = boto3.client("s3", region_name="eu-west-1", endpoint_url=moto_url)
    s3.create_bucket(
        Bucket="tls-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    s3.put_object(Bucket="tls-bucket", Key="tls/orders-eu-west-1/certificates.zip", Body=b"zip")
    glue = boto3.client("glue", region_name="eu-west-1", endpoint_url=moto_url)
    glue.create_database(DatabaseInput={"Name": "default"})

    second = preflight_run()
    assert "PASS  TLS certificate zip" in second.stdout
    assert "PASS  Glue default database" in second.stdout
    assert "preflight orders-eu-west-1: 6 passed, 0 failed" in second.stdout
    assert second.returncode == 0


def test_unknown_instance_is_a_usage_error(tmp_path: Path) -> None:
    assert (
        preflight.main(["--instance", "x-eu-west-1", "--cdk-json", str(_cdk_json(tmp_path))]) == 2
    )


# ------------------------------------------------------------------ stubs


class Stub:
    """Answers one method with a canned response (or raises it)."""

    def __init__(self, **responses: Any) -> None:
        self.responses = responses

    def __getattr__(self, name: str) -> Any:
        response = self.responses[name]

        def call(**_kwargs: Any) -> Any:
            if isinstance(response, Exception):
                raise response
            return response

        return call


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
    clients = {
        "emr": Stub(list_release_labels={"ReleaseLabels": ["emr-spark-8.1.0"]}),
        "s3": Stub(head_object={}),
        "ec2": Stub(
            describe_availability_zones={
                "AvailabilityZones": [{"ZoneName": f"eu-west-1{z}"} for z in "abc"]
            }
        ),
        "kafka": Stub(),
        "glue": Stub(get_database={}),
        "kinesis": Stub(
            describe_limits={"OnDemandStreamCount": 50, "OnDemandStreamCountLimit": 50}
        ),
    }
    assert preflight.run_checks(_config(), clients, out) == 1
    text = out.getvalue()
    assert (
        "FAIL  Kinesis capacity: 50 of 50 on-demand streams in use\n      fix: request a higher"
        in text
    )
    assert text.count("PASS  ") == 5
