"""Check an account and region before an instance's first deploy: ``make preflight INSTANCE=…``.

Runs read-only boto3 calls with the caller's credentials and prints, per
check, ``PASS`` or ``FAIL`` and, on fail, the fix. Each check is something a
first ``cdk deploy`` or the job's first start would otherwise trip over
minutes in (docs/deploy.md, "First deploy"):

* the EMR release label exists in the region (``ListReleaseLabels``);
* the TLS zip object exists and is readable (``HeadObject``);
* a created VPC: the region has the 3 availability zones it spans;
* an imported VPC: NAT or the S3, Kinesis, Glue, CloudWatch and STS endpoints;
* an imported MSK cluster: provisioned, ACTIVE, Kafka >= 3.6, IAM client auth;
* the Glue ``default`` database exists (Spark's Hive client reads it at start);
* the Kinesis shard quota has room for the instance's stream.

Exit codes: 0 every check passed, 1 at least one failed, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from app import aws_clients
from infra.config import (
    CREATED_VPC_ZONES,
    MIN_KAFKA_VERSION,
    InstanceConfig,
    load_instances,
    read_cdk_context,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
CLIENT_LIMITS: Final = aws_clients.ClientLimits(
    connect_timeout_sec=5, read_timeout_sec=20, retries=3
)
# Interface endpoint services an imported VPC needs without a NAT (S3 may be a
# gateway endpoint): the job's and the nodes' AWS calls.
ENDPOINT_SERVICES: Final = ("s3", "kinesis-streams", "glue", "monitoring", "sts")

Clients = Mapping[str, Any]


@dataclass(frozen=True)
class Result:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def _error(exc: Exception) -> str:
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


def check_release_label(config: InstanceConfig, clients: Clients) -> Result:
    name = "EMR release label"
    label = config.emr.release_label
    try:
        found = clients["emr"].list_release_labels(Filters={"Prefix": label}, MaxResults=50)
    except Exception as exc:
        return Result(
            name, False, f"ListReleaseLabels failed: {_error(exc)}", _iam("emr:ListReleaseLabels")
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


def check_tls_object(config: InstanceConfig, clients: Clients) -> Result:
    name = "TLS certificate zip"
    uri = config.emr.tls_certificates_s3_uri
    if config.emr.tls_is_placeholder:
        return Result(name, False, f"{uri} is the example placeholder", _certs_fix(config))
    try:
        clients["s3"].head_object(
            Bucket=config.emr.tls_certificates_bucket, Key=config.emr.tls_certificates_key
        )
    except Exception as exc:
        return Result(name, False, f"{uri}: {_error(exc)}", _certs_fix(config))
    return Result(name, True, f"{uri} exists and is readable")


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
                f"DescribeAvailabilityZones failed: {_error(exc)}",
                _iam("ec2:DescribeAvailabilityZones"),
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
            f"describe calls failed: {_error(exc)}",
            _iam("ec2:DescribeNatGateways, ec2:DescribeVpcEndpoints"),
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
            name, False, f"DescribeClusterV2 failed: {_error(exc)}", _iam("kafka:DescribeClusterV2")
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
        return Result(name, False, f"GetDatabase failed: {_error(exc)}", _iam("glue:GetDatabase"))
    return Result(name, True, "the 'default' database exists")


def check_shard_quota(config: InstanceConfig, clients: Clients) -> Result:
    name = "Kinesis capacity"
    try:
        limits = clients["kinesis"].describe_limits()
    except Exception as exc:
        return Result(
            name, False, f"DescribeLimits failed: {_error(exc)}", _iam("kinesis:DescribeLimits")
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
    check_tls_object,
    check_network,
    check_msk_cluster,
    check_glue_default,
    check_shard_quota,
)
SERVICES: Final = ("emr", "s3", "ec2", "kafka", "glue", "kinesis")


def _iam(actions: str) -> str:
    return f"run with credentials allowed {actions}"


def _certs_fix(config: InstanceConfig) -> str:
    return (
        f"make certs INSTANCE={config.instance_id}, then set emr.tls_certificates_s3_uri "
        "to the value it prints"
    )


def run_checks(config: InstanceConfig, clients: Clients, out: Any) -> int:
    results = [check(config, clients) for check in CHECKS]
    for result in results:
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.name}: {result.detail}", file=out)
        if not result.ok and result.fix:
            print(f"      fix: {result.fix}", file=out)
    failed = sum(not r.ok for r in results)
    print(
        f"preflight {config.instance_id}: {len(results) - failed} passed, {failed} failed",
        file=out,
    )
    return EXIT_FAILED if failed else EXIT_OK


def find_instance(cdk_json: Path, instance: str) -> InstanceConfig | None:
    for config in load_instances(read_cdk_context(cdk_json)):
        if config.instance_id == instance:
            return config
    return None


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
    config = find_instance(Path(args.cdk_json), args.instance)
    if config is None:
        print(
            f"preflight: --instance {args.instance!r}: not declared in {args.cdk_json}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if clients is None:
        clients = {
            service: aws_clients.client(
                service, CLIENT_LIMITS, region=config.region, endpoint_url=args.endpoint_url
            )
            for service in SERVICES
        }
    return run_checks(config, clients, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
