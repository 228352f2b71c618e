"""The TLS certificate zip: readable (``GetObject`` with
``ExpectedBucketOwner``), holding ``privateKey.pem`` and
``certificateChain.pem``, its certificate naming the region's node domain and
valid for :data:`EXPIRY_WARNING_DAYS` more days (a warning below, a failure
once expired: ``make certs`` makes 365-day certificates, and a renewed zip is a
new security configuration, which replaces the cluster; docs/deploy.md, "TLS
certificates"). The zip and PEM parsing is pure; only :func:`check_tls_object`
calls AWS."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from collections.abc import Iterable
from typing import Final

from cryptography import x509
from cryptography.x509.oid import NameOID

from infra.config import InstanceConfig
from scripts.certs import CHAIN, PRIVATE_KEY, node_domain
from scripts.preflight.result import Clients, Result, access_denied, error_text

# EMR's in-transit encryption with PEM certificates loads a zip holding
# privateKey.pem and certificateChain.pem (trustedCertificates.pem optional),
# and the certificate should be a wildcard for the domain the cluster's nodes
# live in
# (https://docs.aws.amazon.com/emr/latest/ManagementGuide/emr-encryption-enable.html,
# "Providing certificates for encrypting data in transit"). That domain is
# ec2.internal in us-east-1 and <region>.compute.internal elsewhere
# (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-naming.html):
# scripts.certs.node_domain.
TLS_ZIP_MAX_BYTES: Final = 5 * 1024 * 1024
TLS_REQUIRED_MEMBERS: Final = (PRIVATE_KEY, CHAIN)
EXPIRY_WARNING_DAYS: Final = 30


class TlsZipError(ValueError):
    """The zip is not what EMR loads; the message says what is wrong."""


def certificate_names(pem: bytes) -> tuple[list[str], str]:
    """The DNS names of the first (leaf) certificate in a PEM chain, and where
    they came from: its subject alternative names, else its common name (a
    TLS client ignores the CN when the certificate has DNS SANs). Pure."""
    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise TlsZipError(f"{CHAIN} holds no readable PEM certificate ({exc})") from exc
    leaf = certificates[0]
    try:
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = [str(name) for name in san.get_values_for_type(x509.DNSName)]
    except x509.ExtensionNotFound:
        dns = []
    if dns:
        return dns, "subject alternative names"
    common = [
        value if isinstance(value, str) else value.decode("utf-8", "replace")
        for value in (a.value for a in leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME))
    ]
    return common, "common name"


def certificate_expiry(pem: bytes) -> dt.datetime:
    """When the first (leaf) certificate of a PEM chain expires (UTC). Pure."""
    try:
        return x509.load_pem_x509_certificates(pem)[0].not_valid_after_utc
    except ValueError as exc:
        raise TlsZipError(f"{CHAIN} holds no readable PEM certificate ({exc})") from exc


def expiry_problem(expires: dt.datetime, now: dt.datetime) -> tuple[bool, str] | None:
    """None when the certificate has :data:`EXPIRY_WARNING_DAYS` days left;
    else (expired, what to say). Pure."""
    left = expires - now
    if left >= dt.timedelta(days=EXPIRY_WARNING_DAYS):
        return None
    day = expires.date().isoformat()
    if left <= dt.timedelta(0):
        return True, f"the certificate expired on {day}"
    return False, f"the certificate expires on {day}, in {left.days} day(s)"


def tls_zip_chain(data: bytes) -> bytes:
    """The ``certificateChain.pem`` of an EMR TLS zip that holds what EMR
    needs; raises :class:`TlsZipError`. Pure."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = set(archive.namelist())
            missing = [m for m in TLS_REQUIRED_MEMBERS if m not in members]
            if missing:
                raise TlsZipError(
                    f"no {' or '.join(missing)} in the zip (it holds: "
                    f"{', '.join(sorted(members)) or 'nothing'}); EMR needs these exact names"
                )
            return archive.read(CHAIN)
    except zipfile.BadZipFile as exc:
        raise TlsZipError(f"not a zip archive ({exc})") from exc


def tls_zip_names(data: bytes) -> tuple[list[str], str]:
    """The certificate names of an EMR TLS zip (:func:`certificate_names` of
    its ``certificateChain.pem``); raises :class:`TlsZipError`. Pure."""
    return certificate_names(tls_zip_chain(data))


def covers_region(names: Iterable[str], region: str) -> bool:
    """True when one of ``names`` is the wildcard for ``region``'s node domain
    (case-insensitive, a trailing dot ignored). A wildcard covers one label,
    so ``*.compute.internal`` does not cover ``ip-….eu-west-1.compute.internal``."""
    wanted = node_domain(region)
    return any(name.strip().rstrip(".").lower() == wanted for name in names)


def certs_fix(config: InstanceConfig) -> str:
    """What to run when the instance has no usable zip: ``make certs`` makes one."""
    return (
        f"make certs INSTANCE={config.instance_id}, then set emr.tls_certificates_s3_uri "
        "to the value it prints"
    )


def _account(config: InstanceConfig, clients: Clients) -> str:
    """The instance's account: ``account`` in cdk.json, else the caller's."""
    if config.account:
        return config.account
    return str(clients["sts"].get_caller_identity()["Account"])


def check_tls_object(config: InstanceConfig, clients: Clients) -> Result:
    name = "TLS certificate zip"
    if config.compute == "serverless":  # no cluster, no TLS zip
        return Result(name, True, f'{config.instance_id} runs on "compute": "serverless": n/a')
    uri = config.emr.tls_certificates_s3_uri
    if config.emr.tls_is_placeholder:
        return Result(name, False, f"{uri} is the example placeholder", certs_fix(config))
    try:
        account = _account(config, clients)
    except Exception as exc:
        return Result(
            name,
            False,
            f"GetCallerIdentity failed: {error_text(exc)}",
            "run with valid credentials, or set the instance's account in cdk.json",
        )
    try:
        # ExpectedBucketOwner: S3 refuses (403) when another account owns the
        # bucket, so a zip is never read from a bucket this account does not own
        # (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-owner-condition.html).
        body = clients["s3"].get_object(
            Bucket=config.emr.tls_certificates_bucket,
            Key=config.emr.tls_certificates_key,
            ExpectedBucketOwner=account,
        )["Body"]
        data = body.read(TLS_ZIP_MAX_BYTES + 1)
    except Exception as exc:
        fix = certs_fix(config)
        if access_denied(exc):
            fix = (
                f"the bucket must belong to account {account} and your credentials need "
                f"s3:GetObject on it; or {fix}"
            )
        return Result(name, False, f"{uri}: {error_text(exc)}", fix)
    if len(data) > TLS_ZIP_MAX_BYTES:
        return Result(
            name, False, f"{uri}: larger than {TLS_ZIP_MAX_BYTES} bytes", certs_fix(config)
        )
    try:
        names, origin = tls_zip_names(data)
        expires = certificate_expiry(tls_zip_chain(data))
    except TlsZipError as exc:
        return Result(name, False, f"{uri}: {exc}", certs_fix(config))
    wanted = node_domain(config.region)
    found = ", ".join(names) or "no DNS name"
    if covers_region(names, config.region):
        detail = f"{uri}: {CHAIN} names {found}, which covers {config.region} ({wanted})"
        problem = expiry_problem(expires, dt.datetime.now(dt.UTC))
        if problem is None:
            return Result(name, True, f"{detail}; valid until {expires.date().isoformat()}")
        expired, text = problem
        renew = (
            f"{certs_fix(config)}; the new URI is a new security configuration, so the "
            'deploy replaces the cluster (docs/infra.md, "TLS certificates")'
        )
        return Result(name, not expired, f"{detail}; {text}", renew, warn=not expired)
    return Result(
        name,
        False,
        f"{uri}: {CHAIN} names {found} ({origin}); EMR nodes in {config.region} are "
        f"{wanted}, which none of them covers",
        f"give {config.instance_id} a zip of its own ({certs_fix(config)} in its "
        "cdk.json entry), or use one certificate whose names cover the node domain of every "
        "region that shares this URI: one certificate serves several regions only if its "
        "names cover all of them (cdk.json's defaults give one TLS URI to every instance "
        "that sets none)",
    )
