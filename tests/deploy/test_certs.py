"""``make certs`` (``python -m scripts.certs``) against an in-process moto S3/STS
server: the zip it uploads is read back and parsed with a real X.509 parser
(issue 10, item 2)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import boto3
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtensionOID, NameOID

from scripts.certs import default_bucket, node_domain

REPO = Path(__file__).resolve().parents[2]
ACCOUNT = "123456789012"  # moto's account


def _certs(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scripts.certs", "--endpoint-url", url, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_node_domain_follows_the_emr_docs() -> None:
    assert node_domain("us-east-1") == "*.ec2.internal"
    assert node_domain("eu-west-1") == "*.eu-west-1.compute.internal"


def test_certs_uploads_a_zip_emr_can_load(moto_url: str) -> None:
    done = _certs(moto_url, "--instance", "orders-eu-west-1")
    assert done.returncode == 0, done.stderr
    bucket = default_bucket(ACCOUNT, "eu-west-1")
    uri = f"s3://{bucket}/tls/orders-eu-west-1/certificates.zip"
    # The config value, printed both as a cdk.json fragment and as a line.
    assert json.dumps({"emr": {"tls_certificates_s3_uri": uri}}) in done.stdout
    assert f"emr.tls_certificates_s3_uri={uri}" in done.stdout.splitlines()

    s3 = boto3.client("s3", region_name="eu-west-1", endpoint_url=moto_url)
    head = s3.head_object(Bucket=bucket, Key="tls/orders-eu-west-1/certificates.zip")
    assert head["ServerSideEncryption"] == "AES256"
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    body = s3.get_object(Bucket=bucket, Key="tls/orders-eu-west-1/certificates.zip")["Body"]
    with zipfile.ZipFile(io.BytesIO(body.read())) as archive:
        assert sorted(archive.namelist()) == [
            "certificateChain.pem",
            "privateKey.pem",
            "trustedCertificates.pem",
        ]
        chain = x509.load_pem_x509_certificate(archive.read("certificateChain.pem"))
        trusted = x509.load_pem_x509_certificate(archive.read("trustedCertificates.pem"))
        key = serialization.load_pem_private_key(archive.read("privateKey.pem"), password=None)

    assert isinstance(key, rsa.RSAPrivateKey)
    assert key.key_size >= 2048
    cn = chain.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert cn == "*.eu-west-1.compute.internal"
    sans = chain.extensions.get_extension_for_oid(ExtensionOID.SUBJECT_ALTERNATIVE_NAME).value
    assert sans.get_values_for_type(x509.DNSName) == ["*.eu-west-1.compute.internal"]
    # The private key belongs to the certificate; the trusted file is that certificate.
    assert key.public_key().public_numbers() == chain.public_key().public_numbers()  # type: ignore[union-attr]
    assert trusted == chain
    lifetime = chain.not_valid_after_utc - chain.not_valid_before_utc
    assert 364 <= lifetime.days <= 366


def test_certs_uses_a_given_bucket_and_refuses_unknown_instances(moto_url: str) -> None:
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_url)
    s3.create_bucket(Bucket="my-tls")
    done = _certs(moto_url, "--instance", "payments-ap-northeast-2", "--bucket", "my-tls")
    assert done.returncode == 0, done.stderr
    assert "s3://my-tls/tls/payments-ap-northeast-2/certificates.zip" in done.stdout

    unknown = _certs(moto_url, "--instance", "refunds-eu-west-1")
    assert unknown.returncode == 2
    assert "not declared in cdk.json; known: orders-ap-northeast-2" in unknown.stderr


def test_a_created_bucket_is_tls_only_versioned_and_private() -> None:
    from moto import mock_aws

    from scripts.certs import ensure_bucket

    with mock_aws():
        s3 = boto3.client("s3", region_name="eu-west-1")
        assert ensure_bucket(s3, "b-tls", "eu-west-1") is True
        assert ensure_bucket(s3, "b-tls", "eu-west-1") is False  # idempotent
        policy = json.loads(s3.get_bucket_policy(Bucket="b-tls")["Policy"])
        (deny,) = policy["Statement"]
        assert deny["Effect"] == "Deny"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        block = s3.get_public_access_block(Bucket="b-tls")["PublicAccessBlockConfiguration"]
        assert all(block.values())
