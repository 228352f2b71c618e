"""scripts.preflight.tls: the TLS zip as EMR loads it, read from the instance's
own bucket, its certificate naming the region's node domain."""

from __future__ import annotations

import datetime
import io
import zipfile

import pytest
from botocore.exceptions import ClientError
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from infra.config import InstanceConfig
from scripts import certs
from scripts.preflight import tls
from scripts.preflight.result import Result, access_denied
from tests.scripts.preflight.stubs import Stub, _access_denied, _config


def test_placeholder_tls_uri_fails_without_a_call() -> None:
    config = _config(
        emr={
            "tls_certificates_s3_uri": "s3://example-emr-tls-certificates/streaming/certificates.zip"
        }
    )
    result = tls.check_tls_object(config, {})
    assert not result.ok and "make certs INSTANCE=orders-eu-west-1" in result.fix


# ------------------------------------------------------------------ TLS certificate names


def _zip_of(certificate_pem: bytes, *, members: tuple[str, ...] = ("privateKey.pem",)) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("certificateChain.pem", certificate_pem)
        for member in members:
            archive.writestr(member, b"-----BEGIN PRIVATE KEY-----\n")
    return buffer.getvalue()


def _certificate(common_name: str, dns_names: list[str]) -> bytes:
    """A self-signed certificate with ``dns_names`` as its SANs (none: no SAN
    extension); an EC key, quicker to make than make certs' RSA one."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = certs.self_signed(key, common_name, dns_names, start=now, days=365)
    return certificate.public_bytes(serialization.Encoding.PEM)


def _tls_check(config: InstanceConfig, zipped: bytes) -> tuple[Result, Stub]:
    s3 = Stub(get_object=lambda: {"Body": io.BytesIO(zipped)})
    sts = Stub(get_caller_identity={"Account": "123456789012"})
    return tls.check_tls_object(config, {"s3": s3, "sts": sts}), s3


def test_a_certificate_from_make_certs_covers_its_region_and_is_read_from_our_bucket() -> None:
    result, s3 = _tls_check(_config(), certs.certificate_zip("eu-west-1", days=365))
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
    s3 = Stub(get_object=lambda: {"Body": io.BytesIO(certs.certificate_zip("eu-west-1", days=365))})
    assert tls.check_tls_object(config, {"s3": s3}).ok
    assert s3.calls[0][1]["ExpectedBucketOwner"] == "210987654321"


def test_a_certificate_for_another_region_fails_naming_region_and_names() -> None:
    """cdk.json's defaults give one TLS URI to ap-northeast-2 and eu-west-1
    instances: a zip made for one region does not serve the other."""
    result, _ = _tls_check(_config(), certs.certificate_zip("ap-northeast-2", days=365))
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
    names, origin = tls.tls_zip_names(_zip_of(_certificate(common_name, sans)))
    assert origin == ("subject alternative names" if sans else "common name")
    assert tls.covers_region(names, region) is covered


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
    result = tls.check_tls_object(_config(), {"s3": s3, "sts": sts})
    assert result.status == "FAIL" and "AccessDenied" in result.detail
    assert "the bucket must belong to account 123456789012" in result.fix


@pytest.mark.parametrize(
    ("code", "denied"),
    [("AccessDenied", True), ("AccessDeniedException", True), ("ThrottlingException", False)],
)
def test_access_denied_reads_the_client_error_code(code: str, denied: bool) -> None:
    error = ClientError({"Error": {"Code": code, "Message": "m"}}, "GetObject")
    assert access_denied(error) is denied


def test_an_error_without_a_response_is_not_access_denied() -> None:
    assert access_denied(RuntimeError("AccessDenied")) is False


# ------------------------------------------------------------------ expiry


@pytest.mark.parametrize(
    ("days", "status", "said"),
    [
        (365, "PASS", "valid until "),
        (31, "PASS", "valid until "),
        (29, "WARN", "the certificate expires on "),
        (1, "WARN", "in 0 day(s)"),
    ],
)
def test_a_certificate_expiring_within_30_days_is_a_warning(
    days: int, status: str, said: str
) -> None:
    result, _ = _tls_check(_config(), certs.certificate_zip("eu-west-1", days=days))
    assert result.status == status, result.detail
    assert said in result.detail
    if status == "WARN":
        assert "make certs INSTANCE=orders-eu-west-1" in result.fix
        assert "replaces the cluster" in result.fix


def test_an_expired_certificate_fails() -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    expired = certs.certificate_zip("eu-west-1", days=10, now=now - datetime.timedelta(days=20))
    result, _ = _tls_check(_config(), expired)
    assert result.status == "FAIL"
    assert "the certificate expired on " in result.detail
    assert tls.expiry_problem(now, now) == (True, "the certificate expired on 2026-01-01")
    assert tls.expiry_problem(now + datetime.timedelta(days=30), now) is None
