"""Create and upload an instance's TLS certificate zip: ``make certs INSTANCE=<domain-region>``.

EMR in-transit encryption with ``CertificateProviderType: PEM`` loads a zip
from S3 that must exist before the cluster is created, with files named
exactly ``privateKey.pem`` and ``certificateChain.pem``, plus
``trustedCertificates.pem`` when the certificate is not signed by a CA Java
trusts by default, which a self-signed one is not. The certificate should be a
wildcard for the domain the nodes live in: ``*.ec2.internal`` in us-east-1,
``*.<region>.compute.internal`` elsewhere
(https://docs.aws.amazon.com/emr/latest/ManagementGuide/emr-encryption-enable.html,
"Providing certificates for encrypting data in transit").

The stack cannot make the zip: a private key must not travel as a CDK asset.
So this command generates it locally (RSA 2048, self-signed, ``--days``
valid), uploads it encrypted with KMS (SSE-KMS, the account's AWS managed key
``aws/s3``) to the instance's artifacts location
``s3://<bucket>/tls/<instance>/certificates.zip`` and prints the value for
``emr.tls_certificates_s3_uri``. The bucket is ``--bucket`` or, by default,
``streaming-artifacts-<account>-<region>``: the stack's own artifacts bucket
does not exist before the first deploy, so the command creates this one when
missing (all public access blocked, TLS-only policy, versioned, noncurrent
versions expired after :data:`NONCURRENT_VERSION_DAYS` days, so a replaced
private key does not stay readable for ever). Every S3 call but the bucket's
creation names the caller's account as ``ExpectedBucketOwner``: a bucket of
that name owned by anyone else is refused, never written to.

Why ``aws/s3``: its key policy lets principals of the account that may read
the object decrypt it through S3, so the nodes (which may read exactly this
object, infra/constructs/emr_cluster.py) need no KMS grant
(https://docs.aws.amazon.com/kms/latest/developerguide/concepts.html#aws-managed-key).
``--out-dir`` keeps a copy of the zip readable by its owner only (0600), and
the private key inside it unpacks 0600 too.

Exit codes: 0 uploaded, 2 bad arguments or an instance not in cdk.json, 5 an
AWS call failed (the message names it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import NameOID

from model import aws_clients
from scripts.command import EXIT_AWS, EXIT_USAGE, OperatorError, declared_instance, run_command

EXIT_OK: Final = 0
CLIENT_LIMITS: Final = aws_clients.ClientLimits(
    connect_timeout_sec=5, read_timeout_sec=30, retries=3
)
# Noncurrent versions of the certificate object (a replaced key) expire.
NONCURRENT_VERSION_DAYS: Final = 30
PRIVATE_FILE_MODE: Final = 0o600
PRIVATE_KEY: Final = "privateKey.pem"
CHAIN: Final = "certificateChain.pem"
TRUSTED: Final = "trustedCertificates.pem"


def node_domain(region: str) -> str:
    """The wildcard the EMR docs name: us-east-1 nodes are ``*.ec2.internal``."""
    return "*.ec2.internal" if region == "us-east-1" else f"*.{region}.compute.internal"


def self_signed(
    key: CertificateIssuerPrivateKeyTypes,
    common_name: str,
    dns_names: Sequence[str],
    *,
    start: dt.datetime,
    days: int,
) -> x509.Certificate:
    """A self-signed CA certificate of ``key`` for ``common_name``, valid ``days``
    from ``start``, with ``dns_names`` as its subject alternative names (none:
    no SAN extension)."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=days))
    )
    if dns_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
        )
    return builder.add_extension(
        x509.BasicConstraints(ca=True, path_length=None), critical=True
    ).sign(key, hashes.SHA256())


def certificate_zip(region: str, *, days: int, now: dt.datetime | None = None) -> bytes:
    """The three PEM files EMR expects, zipped (deterministic member order)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    start = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(minutes=5)
    domain = node_domain(region)
    certificate = self_signed(key, domain, [domain], start=start, days=days)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data, mode in (
            (PRIVATE_KEY, key_pem, PRIVATE_FILE_MODE),
            (CHAIN, cert_pem, 0o644),
            (TRUSTED, cert_pem, 0o644),
        ):
            info = zipfile.ZipInfo(member, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            # Unix permissions in the high 16 bits: unzip restores them, so
            # the unpacked private key is its owner's only.
            info.external_attr = (0o100000 | mode) << 16
            archive.writestr(info, data)
    return buffer.getvalue()


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` readable and writable by the owner only (0600), also
    when ``path`` already exists with wider permissions."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE_MODE)
    try:
        os.fchmod(descriptor, PRIVATE_FILE_MODE)
        os.write(descriptor, data)
    finally:
        os.close(descriptor)


def default_bucket(account: str, region: str) -> str:
    return f"streaming-artifacts-{account}-{region}"


def ensure_bucket(s3: Any, bucket: str, region: str, *, owner: str, tls_only: bool = True) -> bool:
    """Create the bucket hardened if it does not exist; True if it was created.
    ``owner`` is the account that must own it (``ExpectedBucketOwner`` on
    every call that takes it: a bucket of that name in another account fails
    with 403 instead of being used). ``tls_only=False`` is for a plain-HTTP
    emulator endpoint, where a deny-unless-TLS policy would refuse every request."""
    mine = {"ExpectedBucketOwner": owner}
    try:
        s3.head_bucket(Bucket=bucket, **mine)
        return False
    except s3.exceptions.ClientError as exc:
        if exc.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket", "NotFound"):
            raise
    create: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        create["CreateBucketConfiguration"] = {"LocationConstraint": region}
    # CreateBucket takes no ExpectedBucketOwner: it creates in the caller's account.
    s3.create_bucket(**create)
    s3.put_public_access_block(
        Bucket=bucket,
        **mine,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": True,
            "RestrictPublicBuckets": True,
        },
    )
    s3.put_bucket_versioning(Bucket=bucket, **mine, VersioningConfiguration={"Status": "Enabled"})
    s3.put_bucket_lifecycle_configuration(
        Bucket=bucket,
        **mine,
        LifecycleConfiguration={
            "Rules": [
                {
                    "ID": "ExpireNoncurrentVersions",
                    "Status": "Enabled",
                    "Filter": {"Prefix": ""},
                    "NoncurrentVersionExpiration": {"NoncurrentDays": NONCURRENT_VERSION_DAYS},
                    "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 7},
                }
            ]
        },
    )
    if not tls_only:
        return True
    s3.put_bucket_policy(
        Bucket=bucket,
        **mine,
        Policy=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Sid": "TlsOnly",
                        "Effect": "Deny",
                        "Principal": "*",
                        "Action": "s3:*",
                        "Resource": [f"arn:aws:s3:::{bucket}", f"arn:aws:s3:::{bucket}/*"],
                        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                    }
                ],
            }
        ),
    )
    return True


def run(args: argparse.Namespace, out: Any) -> int:
    config = declared_instance(args.instance, Path(args.cdk_json))
    region = config.region

    def client(service: str) -> Any:
        return aws_clients.client(
            service, CLIENT_LIMITS, region=region, endpoint_url=args.endpoint_url
        )

    s3 = client("s3")
    try:
        account = client("sts").get_caller_identity()["Account"]
        bucket = args.bucket or default_bucket(account, region)
        plain_http = (args.endpoint_url or "").startswith("http://")
        if ensure_bucket(s3, bucket, region, owner=account, tls_only=not plain_http):
            print(
                f"created bucket s3://{bucket} (versioned, noncurrent versions expire after "
                f"{NONCURRENT_VERSION_DAYS} days, public access blocked, TLS only)",
                file=out,
            )
        key = f"tls/{config.instance_id}/certificates.zip"
        body = certificate_zip(region, days=args.days)
        # SSE-KMS with the AWS managed key aws/s3 (no SSEKMSKeyId).
        s3.put_object(
            Bucket=bucket,
            Key=key,
            Body=body,
            ExpectedBucketOwner=account,
            ServerSideEncryption="aws:kms",
        )
    except Exception as exc:  # botocore errors of any kind: name the call, exit 5
        raise OperatorError(EXIT_AWS, f"S3/STS call failed: {exc}") from exc
    if args.out_dir:
        out_dir = Path(args.out_dir)
        out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(out_dir / "certificates.zip", body)
    uri = f"s3://{bucket}/{key}"
    print(f"uploaded {uri} (CN {node_domain(region)}, valid {args.days} days)", file=out)
    print("set it in cdk.json for this instance:", file=out)
    print(
        json.dumps({"emr": {"tls_certificates_s3_uri": uri}}),
        file=out,
    )
    print(f"emr.tls_certificates_s3_uri={uri}", file=out)
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scripts.certs", description=__doc__.split("\n")[0])
    p.add_argument("--instance", required=True, help="<domain>-<region> as declared in cdk.json")
    p.add_argument("--bucket", help="upload here instead of streaming-artifacts-<account>-<region>")
    p.add_argument("--days", type=int, default=365, help="certificate validity (default 365)")
    p.add_argument("--cdk-json", default="cdk.json", help="where the instances are declared")
    p.add_argument("--out-dir", help="also keep a copy of the zip here")
    p.add_argument("--endpoint-url", help="S3/STS endpoint (emulators and tests)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)

    def act() -> int:
        if args.days < 1:
            raise OperatorError(EXIT_USAGE, f"--days {args.days}: expected an integer >= 1")
        return run(args, sys.stdout)

    return run_command("certs", act)


if __name__ == "__main__":
    sys.exit(main())
