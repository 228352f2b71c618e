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
* the region is bootstrapped for the CDK (scripts/preflight/bootstrap.py; run
  first);
* no fixed-name resource of a destroyed ``RETAIN`` instance is left behind,
  and a deployed stack's template agrees with cdk.json's ``deployed`` record
  (scripts/preflight/stack.py);
* the EC2 On-Demand vCPU, VPC and Elastic IP quotas have room for what the
  stack creates (scripts/preflight/quotas.py).

Each check is a module of this package, in the order :mod:`scripts.preflight.checks`
lists them; this module only runs them and prints the results.

Exit codes: 0 no check failed (warnings allowed), 1 at least one failed, 2 bad
arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from infra.config import (
    InstanceConfig,
    read_cdk_context,
)
from model import aws_clients
from scripts.command import OperatorError, declared_instance
from scripts.preflight.bootstrap import bootstrap_check, qualifier
from scripts.preflight.checks import CHECKS, Check
from scripts.preflight.result import Clients

EXIT_OK, EXIT_FAILED = 0, 1
CLIENT_LIMITS: Final = aws_clients.ClientLimits(
    connect_timeout_sec=5, read_timeout_sec=20, retries=3
)


SERVICES: Final = (
    "emr",
    "emr-serverless",  # scripts/preflight/serverless.py
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
