"""``python -m scripts.preflight``: the command against a moto server (each check
reported with its fix), its usage errors, and the PASS/WARN/FAIL lines of
:func:`run_checks`."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import boto3

from scripts import certs
from scripts.preflight import __main__ as preflight
from tests.scripts.preflight.stubs import Stub, _cdk_json, _config, _healthy_clients, _not_found

REPO = Path(__file__).resolve().parents[3]

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
        Body=certs.certificate_zip("eu-west-1", days=365),
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
    # it, and fail as an unreadable quota does (tests/scripts/preflight/test_quotas.py
    # covers them with a fake).
    failed = [line for line in second.stdout.splitlines() if line.startswith("FAIL")]
    assert [line.split(":")[0] for line in failed] == [
        "FAIL  EC2 vCPU quota",
        "FAIL  Elastic IP quota",
    ]
    assert all("GetAWSDefaultServiceQuota ec2/L-" in line for line in failed)
    assert "preflight orders-eu-west-1: 16 passed, 0 warning(s), 2 failed" in second.stdout
    assert second.returncode == 1


def test_unknown_instance_is_a_usage_error(tmp_path: Path) -> None:
    assert (
        preflight.main(["--instance", "x-eu-west-1", "--cdk-json", str(_cdk_json(tmp_path))]) == 2
    )


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
    assert text.count("PASS  ") == 16  # the two serverless checks pass as n/a on EMR
    assert "preflight orders-eu-west-1: 16 passed, 0 warning(s), 1 failed" in text
