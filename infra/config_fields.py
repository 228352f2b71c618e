"""The field types of an instance's configuration (infra/config.py): each a
pattern or a check, with the words that say what is allowed, so a bad value
names the field, the value and what it may be (:mod:`model.config_kit`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Annotated, Final

from emr.releases import EMR_REGIONS_PAGE, JOB_SPARK_VERSION, known_regions, supported_labels
from infra.sizing import INSTANCE_TYPES
from model.config_kit import Allowed

# A domain is a fragment of a Glue database name (lowercase, digits, `_`), a
# Kinesis stream name, a Kafka topic name and a CloudFormation stack name (no
# `_`): lowercase alphanumerics fit all four.
DOMAIN_PATTERN: Final = re.compile(r"^[a-z][a-z0-9]{1,30}$")
ACCOUNT_PATTERN: Final = re.compile(r"^\d{12}$")
MSK_CLUSTER_ARN_PATTERN: Final = re.compile(
    r"^arn:aws(-[a-z]+)*:kafka:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"cluster/[A-Za-z0-9-]{1,64}/[A-Za-z0-9-]{1,64}$"
)
KAFKA_VERSION_PATTERN: Final = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)\.(\d+|x)(\.kraft)?$")
MSK_BROKER_TYPE_PATTERN: Final = re.compile(r"^kafka\.[a-z0-9]+\.[a-z0-9]+$")
EC2_INSTANCE_TYPE_PATTERN: Final = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
VPC_ID_PATTERN: Final = re.compile(r"^vpc-[0-9a-f]{8,17}$")
SUBNET_ID_PATTERN: Final = re.compile(r"^subnet-[0-9a-f]{8,17}$")
CIDR_PATTERN: Final = re.compile(r"^\d{1,3}(\.\d{1,3}){3}/(1[6-9]|2[0-8])$")
TLS_ZIP_URI_PATTERN: Final = re.compile(
    r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>.+\.zip)$"
)
EMAIL_PATTERN: Final = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
SHA256_PATTERN: Final = re.compile(r"^[0-9a-f]{64}$")

MIN_KAFKA_VERSION: Final = (3, 6)  # AWS::MSK::Topic needs Kafka >= 3.6


def _matches(pattern: re.Pattern[str], allowed: str) -> Allowed:
    """The whole string must match (``fullmatch``: a trailing newline is not
    tolerated, as ``re.match`` with ``$`` would)."""
    return Allowed(lambda value: pattern.fullmatch(value) is not None, allowed)


def _listed(values: Callable[[], Iterable[str]], allowed: str) -> Allowed:
    """The value must be one of ``values()`` (read when a value is checked)."""
    return Allowed(lambda value: value in values(), allowed)


def kafka_version_supported(value: str) -> bool:
    found = KAFKA_VERSION_PATTERN.fullmatch(value)
    return found is not None and (int(found["major"]), int(found["minor"])) >= MIN_KAFKA_VERSION


Domain = Annotated[str, _matches(DOMAIN_PATTERN, "2-31 lowercase letters/digits, starting a-z")]
_REGIONS_ALLOWED: Final = (
    f"a Region where Amazon EMR runs, such as eu-west-1 ({EMR_REGIONS_PAGE}; "
    "emr/releases.py EMR_REGIONS)"
)
Region = Annotated[str, _listed(known_regions, _REGIONS_ALLOWED)]
Account = Annotated[str, _matches(ACCOUNT_PATTERN, "12 digits or null")]
_LABELS_ALLOWED: Final = (
    f"a release label whose Spark is the job's {JOB_SPARK_VERSION}: "
    f"{', '.join(supported_labels())} (emr/releases.py)"
)
ReleaseLabel = Annotated[str, _listed(supported_labels, _LABELS_ALLOWED)]
Ec2InstanceType = Annotated[
    str, _matches(EC2_INSTANCE_TYPE_PATTERN, "an EC2 instance type such as m5.xlarge")
]
SizedInstanceType = Annotated[
    str, Allowed(lambda value: value in INSTANCE_TYPES, ", ".join(sorted(INSTANCE_TYPES)))
]
TlsZipUri = Annotated[
    str,
    _matches(
        TLS_ZIP_URI_PATTERN,
        "s3://<bucket>/<key>.zip holding the PEM certificates for in-transit "
        "encryption (docs/infra.md)",
    ),
]
Email = Annotated[str, _matches(EMAIL_PATTERN, "an e-mail address")]
Sha256 = Annotated[
    str, _matches(SHA256_PATTERN, "64 lowercase hex digits (the sha256 cdk synth names), or null")
]
VpcId = Annotated[str, _matches(VPC_ID_PATTERN, "vpc-<hex> or null")]
SubnetId = Annotated[str, _matches(SUBNET_ID_PATTERN, "subnet-<hex>")]
Cidr = Annotated[str, _matches(CIDR_PATTERN, "an IPv4 CIDR /16../28")]
MskClusterArn = Annotated[
    str,
    _matches(
        MSK_CLUSTER_ARN_PATTERN,
        "arn:aws:kafka:<region>:<12-digit account>:cluster/<name>/<uuid>, or null",
    ),
]
