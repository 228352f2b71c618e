"""Check an account and region before an instance's first deploy: ``make preflight INSTANCE=…``.

Runs read-only boto3 calls with the caller's credentials and prints, per
check, ``PASS``, ``WARN`` or ``FAIL`` and, on fail, the fix (on a warning,
what to check). Each check is something a first ``cdk deploy`` or the job's
first start would otherwise trip over minutes in (docs/deploy.md, "First
deploy"):

* the EMR release label exists in the region (``ListReleaseLabels``);
* which Kinesis source the job will run and why (no call): a warning when the
  instance chose the aws-kinesis connector on a release whose default is not;
* the TLS zip: readable (``GetObject`` with ``ExpectedBucketOwner``), holds
  ``privateKey.pem`` and ``certificateChain.pem``, and the certificate names
  the instance region's node domain;
* a created VPC: the region has the 3 availability zones it spans;
* an imported VPC: NAT or the S3, Kinesis, Glue, CloudWatch and STS endpoints;
* an imported MSK cluster: provisioned, ACTIVE, Kafka >= 3.6, IAM client auth;
* the failure-record size: the job's producer ``message.max.bytes`` and the
  topic's ``max.message.bytes`` derive from ``kafka.max_message_bytes`` and
  agree (a fail names the field); on an imported cluster, a warning when its
  configuration sets a broker ``message.max.bytes`` below the topic's;
* the Glue ``default`` database exists (Spark's Hive client reads it at start);
* Lake Formation: whether it governs new Data Catalog databases and tables,
  and if so that the instance sets ``lake_formation_permissions``;
* the Kinesis shard quota has room for the instance's stream;
* the region is bootstrapped for the CDK (scripts/preflight_bootstrap.py; run
  first);
* no fixed-name resource of a destroyed ``RETAIN`` instance is left behind,
  and a deployed stack's template agrees with cdk.json's ``deployed`` record
  (scripts/preflight_stack.py);
* the EC2 On-Demand vCPU, VPC and Elastic IP quotas have room for what the
  stack creates (scripts/preflight_quotas.py).

Exit codes: 0 no check failed (warnings allowed), 1 at least one failed, 2 bad
arguments.
"""

from __future__ import annotations

import argparse
import io
import sys
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from app import aws_clients
from infra.config import (
    CREATED_VPC_ZONES,
    MIN_KAFKA_VERSION,
    InstanceConfig,
    read_cdk_context,
)
from infra.job_config import source_choice
from scripts.certs import CHAIN, PRIVATE_KEY, node_domain
from scripts.command import OperatorError, declared_instance
from scripts.preflight_bootstrap import bootstrap_check, qualifier
from scripts.preflight_quotas import check_eip_quota, check_vcpu_quota, check_vpc_quota
from scripts.preflight_result import (
    ACCESS_DENIED_CODES,
    Clients,
    Result,
    error_code,
    error_text,
    iam_fix,
)
from scripts.preflight_stack import check_deployed_record, check_left_behind

EXIT_OK, EXIT_FAILED = 0, 1
CLIENT_LIMITS: Final = aws_clients.ClientLimits(
    connect_timeout_sec=5, read_timeout_sec=20, retries=3
)
# Interface endpoint services an imported VPC needs without a NAT (S3 may be a
# gateway endpoint): the job's and the nodes' AWS calls.
ENDPOINT_SERVICES: Final = ("s3", "kinesis-streams", "glue", "monitoring", "sts")


def check_release_label(config: InstanceConfig, clients: Clients) -> Result:
    name = "EMR release label"
    label = config.emr.release_label
    try:
        found = clients["emr"].list_release_labels(Filters={"Prefix": label}, MaxResults=50)
    except Exception as exc:
        return Result(
            name,
            False,
            f"ListReleaseLabels failed: {error_text(exc)}",
            iam_fix("emr:ListReleaseLabels"),
        )
    labels = found.get("ReleaseLabels", [])
    if label in labels:
        return Result(name, True, f"{label} is available in {config.region}")
    return Result(
        name,
        False,
        f"{label} is not offered in {config.region} (found: {', '.join(labels) or 'none'})",
        "choose a region that offers it, or a supported label in infra/releases.py",
    )


# The awslabs connector behind format("aws-kinesis"): EMR images of release
# 7.1.0 and later include it
# (https://docs.aws.amazon.com/emr/latest/ReleaseGuide/emr-spark-structured-streaming-kinesis.html),
# but the emr-spark-8.1.0 release page does not list it
# (https://docs.aws.amazon.com/emr/latest/ReleaseGuide/emr-spark810-release.html),
# its only release (v2.0.0) is built for Spark 4.0.1, and Spark 4.1 support is
# on its main branch only (2.1.0-SNAPSHOT,
# https://github.com/awslabs/spark-sql-kinesis-connector/pull/87).
CONNECTOR_LIB_DIR: Final = "/usr/share/aws/kinesis/spark-sql-kinesis/lib/"
CONNECTOR_PR: Final = "https://github.com/awslabs/spark-sql-kinesis-connector/pull/87"


def check_kinesis_source(config: InstanceConfig, clients: Clients) -> Result:
    """Which reader the job runs on AWS, and why (:func:`infra.job_config.source_choice`).
    No call. A warning when the instance chose the connector on a release
    whose default is the Python reader: nothing here can prove the connector
    is on the release's image."""
    name = "Kinesis source"
    chosen, reason = source_choice(config)
    release = config.emr.release
    detail = f"{chosen} on {release.label} ({reason})"
    if chosen == "aws-kinesis" and release.kinesis_source != "aws-kinesis":
        return Result(
            name,
            True,
            f"aws-kinesis on {release.label}, whose default is {release.kinesis_source}: the "
            f"awslabs connector is not listed on the release page ({release.source}) and its "
            f"Spark {release.spark.rsplit('.', 1)[0]} build is unreleased (v2.0.0 is built for "
            f"Spark 4.0.1; 4.1 support is on its main branch only, {CONNECTOR_PR})",
            f"after the deploy, run ls {CONNECTOR_LIB_DIR} on a cluster node (docs/deploy.md); "
            "if it is missing or not a Spark 4.1 build, put there a jar you built from the "
            "connector's main branch, or drop job.source.format from the instance to run "
            f"{release.kinesis_source} (it reads enhanced fan-out too)",
            warn=True,
        )
    return Result(name, True, detail)


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


class TlsZipError(ValueError):
    """The zip is not what EMR loads; the message says what is wrong."""


def certificate_names(pem: bytes) -> tuple[list[str], str]:
    """The DNS names of the first (leaf) certificate in a PEM chain, and where
    they came from: its subject alternative names, else its common name (a
    TLS client ignores the CN when the certificate has DNS SANs). Pure."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

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


def tls_zip_names(data: bytes) -> tuple[list[str], str]:
    """The certificate names of an EMR TLS zip (:func:`certificate_names` of
    its ``certificateChain.pem``); raises :class:`TlsZipError`. Pure."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = set(archive.namelist())
            missing = [m for m in TLS_REQUIRED_MEMBERS if m not in members]
            if missing:
                raise TlsZipError(
                    f"no {' or '.join(missing)} in the zip (it holds: "
                    f"{', '.join(sorted(members)) or 'nothing'}); EMR needs these exact names"
                )
            chain = archive.read(CHAIN)
    except zipfile.BadZipFile as exc:
        raise TlsZipError(f"not a zip archive ({exc})") from exc
    return certificate_names(chain)


def covers_region(names: Iterable[str], region: str) -> bool:
    """True when one of ``names`` is the wildcard for ``region``'s node domain
    (case-insensitive, a trailing dot ignored). A wildcard covers one label,
    so ``*.compute.internal`` does not cover ``ip-….eu-west-1.compute.internal``."""
    wanted = node_domain(region)
    return any(name.strip().rstrip(".").lower() == wanted for name in names)


def _account(config: InstanceConfig, clients: Clients) -> str:
    """The instance's account: ``account`` in cdk.json, else the caller's."""
    if config.account:
        return config.account
    return str(clients["sts"].get_caller_identity()["Account"])


def check_tls_object(config: InstanceConfig, clients: Clients) -> Result:
    name = "TLS certificate zip"
    uri = config.emr.tls_certificates_s3_uri
    if config.emr.tls_is_placeholder:
        return Result(name, False, f"{uri} is the example placeholder", _certs_fix(config))
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
        fix = _certs_fix(config)
        if error_code(exc) in ACCESS_DENIED_CODES:
            fix = (
                f"the bucket must belong to account {account} and your credentials need "
                f"s3:GetObject on it; or {fix}"
            )
        return Result(name, False, f"{uri}: {error_text(exc)}", fix)
    if len(data) > TLS_ZIP_MAX_BYTES:
        return Result(
            name, False, f"{uri}: larger than {TLS_ZIP_MAX_BYTES} bytes", _certs_fix(config)
        )
    try:
        names, origin = tls_zip_names(data)
    except TlsZipError as exc:
        return Result(name, False, f"{uri}: {exc}", _certs_fix(config))
    wanted = node_domain(config.region)
    found = ", ".join(names) or "no DNS name"
    if covers_region(names, config.region):
        return Result(
            name, True, f"{uri}: {CHAIN} names {found}, which covers {config.region} ({wanted})"
        )
    return Result(
        name,
        False,
        f"{uri}: {CHAIN} names {found} ({origin}); EMR nodes in {config.region} are "
        f"{wanted}, which none of them covers",
        f"give {config.instance_id} a zip of its own ({_certs_fix(config)} in its "
        "cdk.json entry), or use one certificate whose names cover the node domain of every "
        "region that shares this URI: one certificate serves several regions only if its "
        "names cover all of them (cdk.json's defaults give one TLS URI to every instance "
        "that sets none)",
    )


def check_network(config: InstanceConfig, clients: Clients) -> Result:
    ec2 = clients["ec2"]
    network = config.network
    if network.vpc_id is None:
        name = "availability zones"
        wanted = len(network.availability_zones) or CREATED_VPC_ZONES
        try:
            zones = ec2.describe_availability_zones(
                Filters=[{"Name": "state", "Values": ["available"]}]
            )["AvailabilityZones"]
        except Exception as exc:
            return Result(
                name,
                False,
                f"DescribeAvailabilityZones failed: {error_text(exc)}",
                iam_fix("ec2:DescribeAvailabilityZones"),
            )
        names = {zone["ZoneName"] for zone in zones}
        missing = sorted(set(network.availability_zones) - names)
        if missing or len(names) < wanted:
            return Result(
                name,
                False,
                f"the created VPC needs {wanted} zones; {config.region} has {sorted(names)}"
                + (f", not {missing}" if missing else ""),
                "list existing zones in network.availability_zones, or lower kafka.broker_count "
                "to a multiple of the zones there are",
            )
        return Result(
            name, True, f"{config.region} has {len(names)} zones (the VPC spans {wanted})"
        )
    name = "imported VPC egress"
    try:
        nats = ec2.describe_nat_gateways(
            Filters=[
                {"Name": "vpc-id", "Values": [network.vpc_id]},
                {"Name": "state", "Values": ["available"]},
            ]
        )["NatGateways"]
        endpoints = ec2.describe_vpc_endpoints(
            Filters=[{"Name": "vpc-id", "Values": [network.vpc_id]}]
        )["VpcEndpoints"]
    except Exception as exc:
        return Result(
            name,
            False,
            f"describe calls failed: {error_text(exc)}",
            iam_fix("ec2:DescribeNatGateways, ec2:DescribeVpcEndpoints"),
        )
    if nats:
        return Result(name, True, f"{network.vpc_id} has a NAT gateway ({nats[0]['NatGatewayId']})")
    have = {e["ServiceName"].rsplit(".", 1)[-1] for e in endpoints}
    missing = [service for service in ENDPOINT_SERVICES if service not in have]
    if not missing:
        return Result(
            name, True, f"{network.vpc_id} has endpoints for {', '.join(ENDPOINT_SERVICES)}"
        )
    return Result(
        name,
        False,
        f"{network.vpc_id} has no NAT gateway and no endpoint for {', '.join(missing)}",
        "add a NAT gateway to the private subnets' route, or VPC endpoints for "
        + ", ".join(f"com.amazonaws.{config.region}.{s}" for s in missing),
    )


def check_msk_cluster(config: InstanceConfig, clients: Clients) -> Result:
    name = "imported MSK cluster"
    arn = config.kafka.cluster_arn
    if arn is None:
        return Result(name, True, "the stack creates its own cluster")
    try:
        info = clients["kafka"].describe_cluster_v2(ClusterArn=arn)["ClusterInfo"]
    except Exception as exc:
        return Result(
            name,
            False,
            f"DescribeClusterV2 failed: {error_text(exc)}",
            iam_fix("kafka:DescribeClusterV2"),
        )
    provisioned = info.get("Provisioned")
    problems = []
    if info.get("ClusterType") != "PROVISIONED" or provisioned is None:
        problems.append(f"type {info.get('ClusterType')} (AWS::MSK::Topic needs PROVISIONED)")
    if info.get("State") != "ACTIVE":
        problems.append(f"state {info.get('State')}")
    if provisioned is not None:
        version = provisioned.get("CurrentBrokerSoftwareInfo", {}).get("KafkaVersion", "")
        parts = version.split(".")
        if (
            len(parts) < 2
            or not all(p.isdigit() for p in parts[:2])
            or (
                int(parts[0]),
                int(parts[1]),
            )
            < MIN_KAFKA_VERSION
        ):
            problems.append(f"Kafka {version or 'unknown'} (needs >= 3.6)")
        sasl = provisioned.get("ClientAuthentication", {}).get("Sasl", {})
        if not sasl.get("Iam", {}).get("Enabled"):
            problems.append("IAM client authentication off")
        brokers = provisioned.get("NumberOfBrokerNodes", 0)
        if brokers and brokers < config.kafka.topic_replication_factor:
            problems.append(
                f"{brokers} brokers < kafka.topic_replication_factor "
                f"{config.kafka.topic_replication_factor}"
            )
    if problems:
        return Result(
            name,
            False,
            f"{arn}: " + "; ".join(problems),
            "use an ACTIVE provisioned cluster on Kafka >= 3.6 with IAM client auth, or "
            "leave kafka.cluster_arn null to create one",
        )
    return Result(name, True, f"{arn} is provisioned, ACTIVE, Kafka >= 3.6, IAM auth")


def check_failure_message_size(config: InstanceConfig, clients: Clients) -> Result:
    """The producer's and the topic's limits, as the job and the stack derive
    them from ``kafka.max_message_bytes`` (no call), and for an imported
    cluster the broker default its configuration sets, if any (read-only
    DescribeClusterV2 and DescribeConfigurationRevision). A topic's own
    ``max.message.bytes`` overrides the broker's ``message.max.bytes``
    (https://kafka.apache.org/documentation/#topicconfigs_max.message.bytes),
    so a lower broker value is a warning: a tool that creates the topic by hand
    without the topic config would get the broker's."""
    from app.config import KafkaOptions
    from app.failure_limits import limit_problems
    from app.sinks.kafka import KafkaSettings, producer_config
    from infra.constructs.failure_topic import topic_configs

    name = "failure record size"
    field = "kafka.max_message_bytes"
    options = KafkaOptions(
        topic=config.failure_topic_name,
        bootstrap_servers="preflight",
        max_message_bytes=config.kafka.max_message_bytes,
    )
    settings = KafkaSettings.from_options(
        options, region=config.region, instance_id=config.instance_id, bootstrap_servers="-"
    )
    producer = int(producer_config(settings)["message.max.bytes"])
    topic = int(topic_configs(config.kafka)["max.message.bytes"])
    problems = limit_problems(
        producer_message_max_bytes=producer, topic_max_message_bytes=topic, field=field
    )
    detail = (
        f"producer message.max.bytes {producer:,}, topic max.message.bytes {topic:,} "
        f"(from {field} {config.kafka.max_message_bytes:,}); larger originals go to the "
        "claim-check store"
    )
    if problems:
        return Result(
            name, False, "; ".join(problems), "derive both from app.failure_limits.FailureLimits"
        )
    arn = config.kafka.cluster_arn
    if arn is None:
        return Result(name, True, detail)
    broker = _broker_message_max_bytes(clients["kafka"], arn)
    if isinstance(broker, str):
        return Result(
            name,
            True,
            f"{detail}; the cluster's broker configuration could not be read: {broker}",
            f"check that {arn} takes topic configs of max.message.bytes={topic}; "
            + iam_fix("kafka:DescribeClusterV2, kafka:DescribeConfigurationRevision"),
            warn=True,
        )
    if broker is not None and broker < topic:
        return Result(
            name,
            True,
            f"{detail}; the cluster's configuration sets message.max.bytes={broker:,}, "
            "below the topic's (the topic's own setting overrides it)",
            "nothing to change for the stack's topic; a topic created by hand needs "
            f"max.message.bytes={topic}",
            warn=True,
        )
    return Result(name, True, detail)


def _broker_message_max_bytes(kafka: Any, arn: str) -> int | str | None:
    """The ``message.max.bytes`` an imported cluster's configuration sets (None:
    not set, Kafka's default applies), or why it could not be read."""
    try:
        info = kafka.describe_cluster_v2(ClusterArn=arn)["ClusterInfo"]
        software = (info.get("Provisioned") or {}).get("CurrentBrokerSoftwareInfo", {})
        configuration = software.get("ConfigurationArn")
        if not configuration:
            return None
        revision = kafka.describe_configuration_revision(
            Arn=configuration, Revision=int(software.get("ConfigurationRevision", 1))
        )
    except Exception as exc:
        return error_text(exc)
    raw = revision.get("ServerProperties", b"")
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "message.max.bytes" and value.strip().isdigit():
            return int(value.strip())
    return None


def check_glue_default(config: InstanceConfig, clients: Clients) -> Result:
    name = "Glue default database"
    glue = clients["glue"]
    try:
        glue.get_database(Name="default")
    except glue.exceptions.EntityNotFoundException:
        return Result(
            name,
            False,
            f"no 'default' database in the {config.region} Data Catalog; Spark's Hive "
            "client reads (and would try to create) it at start",
            "create it once per account and region: aws glue create-database "
            f"--region {config.region} --database-input Name=default",
        )
    except Exception as exc:
        return Result(
            name, False, f"GetDatabase failed: {error_text(exc)}", iam_fix("glue:GetDatabase")
        )
    return Result(name, True, "the 'default' database exists")


# Lake Formation governs a new database or table unless the data lake's
# CreateDatabaseDefaultPermissions / CreateTableDefaultPermissions grant ALL to
# IAM_ALLOWED_PRINCIPALS ("Use only IAM access control"); an empty list means
# access control by Lake Formation permissions
# (https://docs.aws.amazon.com/lake-formation/latest/dg/change-settings.html,
# https://docs.aws.amazon.com/lake-formation/latest/APIReference/API_DataLakeSettings.html).
# A database that exists already carries its own CreateTableDefaultPermissions
# for the tables created in it
# (https://docs.aws.amazon.com/glue/latest/webapi/API_Database.html).
IAM_ALLOWED_PRINCIPALS: Final = "IAM_ALLOWED_PRINCIPALS"


def iam_only(entries: Iterable[Mapping[str, Any]] | None) -> bool:
    """True when the default permissions grant ALL to IAM_ALLOWED_PRINCIPALS
    (IAM alone controls access to what is created). Pure."""
    return any(
        entry.get("Principal", {}).get("DataLakePrincipalIdentifier") == IAM_ALLOWED_PRINCIPALS
        and "ALL" in entry.get("Permissions", [])
        for entry in entries or []
    )


def lake_formation_governs(
    settings: Mapping[str, Any], database: Mapping[str, Any] | None
) -> list[str]:
    """What Lake Formation governs of what the stack creates: ``new databases``,
    ``new tables`` (the data lake defaults, absent meaning Lake Formation) and,
    when the instance's database exists already, ``new tables in <db>`` (its
    own defaults). Empty: IAM alone. Pure."""
    governed = []
    if not iam_only(settings.get("CreateDatabaseDefaultPermissions")):
        governed.append("new databases")
    if not iam_only(settings.get("CreateTableDefaultPermissions")):
        governed.append("new tables")
    # A database read without the field says nothing of its own (the data lake
    # defaults above decide); an empty list is Lake Formation's, as above.
    own = None if database is None else database.get("CreateTableDefaultPermissions")
    if database is not None and own is not None and not iam_only(own):
        governed.append(f"new tables in {database.get('Name', '?')}")
    return governed


def check_lake_formation(config: InstanceConfig, clients: Clients) -> Result:
    name = "Lake Formation"
    option = '"lake_formation_permissions": true'
    try:
        settings = clients["lakeformation"].get_data_lake_settings()["DataLakeSettings"]
    except Exception as exc:
        if error_code(exc) in ACCESS_DENIED_CODES:
            return Result(
                name,
                False,
                "GetDataLakeSettings was refused (access denied), so whether Lake Formation "
                "governs the Data Catalog is unknown",
                iam_fix("lakeformation:GetDataLakeSettings")
                + f"; or, if Lake Formation governs it, set {option} in the instance's "
                "cdk.json entry",
            )
        return Result(
            name,
            False,
            f"GetDataLakeSettings failed: {error_text(exc)}",
            iam_fix("lakeformation:GetDataLakeSettings"),
        )
    glue = clients["glue"]
    database: Mapping[str, Any] | None = None
    unchecked = ""
    try:
        database = glue.get_database(Name=config.database_name)["Database"]
    except glue.exceptions.EntityNotFoundException:
        database = None  # the stack creates it: the data lake defaults apply
    except Exception as exc:
        unchecked = f"; database {config.database_name} not read: {error_text(exc)}"
    governed = lake_formation_governs(settings, database)
    if not governed:
        return Result(
            name,
            True,
            "IAM alone controls new databases and tables (IAM_ALLOWED_PRINCIPALS has ALL)"
            + unchecked,
        )
    what = f"Lake Formation governs {', '.join(governed)}"
    if config.lake_formation_permissions:
        return Result(name, True, f"{what}; lake_formation_permissions is on" + unchecked)
    return Result(
        name,
        False,
        f"{what}: the job role and the table optimizer roles need Lake Formation grants "
        "on the database and the table (IAM policies alone are not enough)" + unchecked,
        f"set {option} in the {config.instance_id} entry of cdk.json",
    )


def check_shard_quota(config: InstanceConfig, clients: Clients) -> Result:
    name = "Kinesis capacity"
    try:
        limits = clients["kinesis"].describe_limits()
    except Exception as exc:
        return Result(
            name,
            False,
            f"DescribeLimits failed: {error_text(exc)}",
            iam_fix("kinesis:DescribeLimits"),
        )
    if config.stream.on_demand:
        used = limits.get("OnDemandStreamCount", 0)
        limit = limits.get("OnDemandStreamCountLimit", 0)
        if used + 1 > limit:
            return Result(
                name,
                False,
                f"{used} of {limit} on-demand streams in use",
                "request a higher on-demand stream quota, or set stream.shard_count",
            )
        return Result(name, True, f"{used} of {limit} on-demand streams in use")
    needed = config.stream.shard_count or 0
    used, limit = limits.get("OpenShardCount", 0), limits.get("ShardLimit", 0)
    if used + needed > limit:
        return Result(
            name,
            False,
            f"{needed} shards needed, {limit - used} free ({used} of {limit} open)",
            "request a higher Kinesis shard quota (Service Quotas) or lower stream.shard_count",
        )
    return Result(name, True, f"{needed} shards needed, {limit - used} free")


CHECKS: Final[tuple[Callable[[InstanceConfig, Clients], Result], ...]] = (
    check_release_label,
    check_kinesis_source,
    check_tls_object,
    check_network,
    check_msk_cluster,
    check_failure_message_size,
    check_glue_default,
    check_lake_formation,
    check_shard_quota,
    check_left_behind,
    check_deployed_record,
    check_vcpu_quota,
    check_vpc_quota,
    check_eip_quota,
)
SERVICES: Final = (
    "emr",
    "s3",
    "sts",
    "ec2",
    "kafka",
    "glue",
    "lakeformation",
    "kinesis",
    "ssm",
    "service-quotas",
    "cloudformation",
    "logs",
)
Check = Callable[[InstanceConfig, Clients], Result]


def _certs_fix(config: InstanceConfig) -> str:
    return (
        f"make certs INSTANCE={config.instance_id}, then set emr.tls_certificates_s3_uri "
        "to the value it prints"
    )


def run_checks(
    config: InstanceConfig, clients: Clients, out: Any, checks: Sequence[Check] = CHECKS
) -> int:
    results = [check(config, clients) for check in checks]
    for result in results:
        print(f"{result.status}  {result.name}: {result.detail}", file=out)
        if result.fix and result.status != "PASS":
            print(f"      {'fix' if not result.ok else 'check'}: {result.fix}", file=out)
    counts = {s: sum(r.status == s for r in results) for s in ("PASS", "WARN", "FAIL")}
    print(
        f"preflight {config.instance_id}: {counts['PASS']} passed, {counts['WARN']} "
        f"warning(s), {counts['FAIL']} failed",
        file=out,
    )
    return EXIT_FAILED if counts["FAIL"] else EXIT_OK


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.preflight", description=__doc__.split("\n")[0]
    )
    p.add_argument("--instance", required=True, help="<domain>-<region> as declared in cdk.json")
    p.add_argument("--cdk-json", default="cdk.json", help="where the instances are declared")
    p.add_argument("--endpoint-url", help="one endpoint for every service (emulators and tests)")
    return p


def main(argv: Sequence[str] | None = None, clients: Clients | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        config = declared_instance(args.instance, Path(args.cdk_json))
    except OperatorError as exc:
        print(f"preflight: {exc}", file=sys.stderr)
        return exc.code
    if clients is None:
        clients = {
            service: aws_clients.client(
                service, CLIENT_LIMITS, region=config.region, endpoint_url=args.endpoint_url
            )
            for service in SERVICES
        }
    # The CDK bootstrap first: without it nothing else matters.
    checks = (bootstrap_check(qualifier(read_cdk_context(args.cdk_json))), *CHECKS)
    return run_checks(config, clients, sys.stdout, checks)


if __name__ == "__main__":
    sys.exit(main())
