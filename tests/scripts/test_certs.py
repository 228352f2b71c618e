"""``make certs`` (``python -m scripts.certs``) against an in-process moto S3/STS
server: the zip it uploads is read back and parsed with a real X.509 parser."""

from __future__ import annotations

import datetime
import io
import json
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtensionOID, NameOID
from moto import mock_aws

from scripts import certs
from scripts.certs import (
    NONCURRENT_VERSION_DAYS,
    PRIVATE_KEY,
    certificate_zip,
    default_bucket,
    ensure_bucket,
    node_domain,
    self_signed,
    write_private,
)
from tests.child_process import run_python
from tests.fixtures import EXAMPLE_CDK_JSON

ACCOUNT = "123456789012"  # moto's account


def _certs(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = ("-m", "scripts.certs", "--endpoint-url", url, "--cdk-json", str(EXAMPLE_CDK_JSON))
    return run_python(*command, *args, timeout=120)


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
    assert head["ServerSideEncryption"] == "aws:kms"  # SSE-KMS (aws/s3)
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"
    (rule,) = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert rule["Status"] == "Enabled"
    assert rule["NoncurrentVersionExpiration"]["NoncurrentDays"] == NONCURRENT_VERSION_DAYS
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


def test_self_signed_names_its_sans_only_when_given_and_is_a_ca() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    named = self_signed(key, "cn.example", ["a.example", "b.example"], start=start, days=10)
    sans = named.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["a.example", "b.example"]
    assert named.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert named.issuer == named.subject
    assert (named.not_valid_before_utc, named.not_valid_after_utc) == (
        start,
        start + datetime.timedelta(days=10),
    )
    bare = self_signed(key, "cn.example", [], start=start, days=10)
    with pytest.raises(x509.ExtensionNotFound):
        bare.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_certs_uses_a_given_bucket_and_refuses_unknown_instances(moto_url: str) -> None:
    s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=moto_url)
    s3.create_bucket(Bucket="my-tls")
    done = _certs(moto_url, "--instance", "payments-ap-northeast-2", "--bucket", "my-tls")
    assert done.returncode == 0, done.stderr
    assert "s3://my-tls/tls/payments-ap-northeast-2/certificates.zip" in done.stdout

    unknown = _certs(moto_url, "--instance", "refunds-eu-west-1")
    assert unknown.returncode == 2
    assert f"not declared in {EXAMPLE_CDK_JSON}; declared: orders-ap-northeast-2" in unknown.stderr


def test_a_created_bucket_is_tls_only_versioned_and_private() -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name="eu-west-1")
        assert ensure_bucket(s3, "b-tls", "eu-west-1", owner=ACCOUNT) is True
        assert ensure_bucket(s3, "b-tls", "eu-west-1", owner=ACCOUNT) is False  # idempotent
        policy = json.loads(s3.get_bucket_policy(Bucket="b-tls")["Policy"])
        (deny,) = policy["Statement"]
        assert deny["Effect"] == "Deny"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        block = s3.get_public_access_block(Bucket="b-tls")["PublicAccessBlockConfiguration"]
        # All four settings, each on: all() alone passes on an empty block.
        assert block == {
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        }


class _RecordingS3:
    """An S3 client that records every call; the bucket does not exist."""

    class exceptions:  # noqa: N801 (botocore's attribute name)
        ClientError = ClientError

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, object]]] = []

    def __getattr__(self, name: str) -> object:
        def call(**kwargs: object) -> dict[str, object]:
            self.calls.append((name, kwargs))
            if name == "head_bucket":
                raise self.exceptions.ClientError(
                    {"Error": {"Code": "404", "Message": "Not Found"}}, "HeadBucket"
                )
            return {}

        return call


def test_every_bucket_call_but_creation_names_the_expected_owner() -> None:
    s3 = _RecordingS3()
    assert ensure_bucket(s3, "b-tls", "eu-west-1", owner=ACCOUNT) is True
    names = [name for name, _ in s3.calls]
    assert names[0] == "head_bucket" and "create_bucket" in names
    assert "put_bucket_lifecycle_configuration" in names and "put_bucket_policy" in names
    for name, kwargs in s3.calls:
        if name != "create_bucket":  # CreateBucket has no such parameter
            assert kwargs["ExpectedBucketOwner"] == ACCOUNT, name


def test_the_upload_names_the_expected_owner_and_uses_sse_kms(
    moto_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The put_object call itself, seen through botocore's event hooks."""

    seen: list[dict[str, object]] = []
    original = botocore.session.Session.create_client

    def create_client(self: object, *args: object, **kwargs: object) -> object:
        client = original(self, *args, **kwargs)
        client.meta.events.register(
            "provide-client-params.s3.PutObject",
            lambda params, **_: seen.append(dict(params)),
        )
        return client

    monkeypatch.setattr(botocore.session.Session, "create_client", create_client)

    argv = ["--endpoint-url", moto_url, "--cdk-json", str(EXAMPLE_CDK_JSON)]
    assert certs.main([*argv, "--instance", "orders-eu-west-1"]) == 0
    (put,) = seen
    assert put["ExpectedBucketOwner"] == ACCOUNT
    assert put["ServerSideEncryption"] == "aws:kms"
    assert "SSEKMSKeyId" not in put  # the account's aws/s3 key


def test_the_kept_zip_and_the_key_inside_it_are_the_owners_only(
    moto_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "keep"
    done = _certs(moto_url, "--instance", "orders-eu-west-1", "--out-dir", str(out))
    assert done.returncode == 0, done.stderr
    kept = out / "certificates.zip"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    with zipfile.ZipFile(kept) as archive:
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in archive.infolist()}
        assert modes[PRIVATE_KEY] == 0o600
    # Python's zipfile does not restore modes on extraction; unzip(1) does.
    if shutil.which("unzip"):
        subprocess.run(["unzip", "-q", str(kept), "-d", str(tmp_path / "u")], check=True)
        assert stat.S_IMODE((tmp_path / "u" / PRIVATE_KEY).stat().st_mode) == 0o600


def test_write_private_narrows_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "certificates.zip"
    path.write_bytes(b"old")
    path.chmod(0o644)
    write_private(path, certificate_zip("eu-west-1", days=1))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert zipfile.is_zipfile(path)
