"""THE unit-price table of ``make cost`` (infra/cost/estimate.py): AWS on-demand list
prices, per region, each row naming the pricing page it comes from and the
date it was read.

Versioned with the code on purpose: an estimate printed at ``cdk synth`` must
not depend on the network, and a price change is a reviewed diff here. The
table's version is ``PRICES_READ``; ``make cost --live`` reads the AWS Price
List API instead where credentials exist (infra/cost/live.py).

How the figures were read (2026-11-26; the EMR Serverless, NAT data,
enhanced fan-out rows 2026-11-28): this repository's builders had no
browser, only stored copies of public pages. Where a stored AWS pricing page
showed a figure it is used as is; where it did not (AWS renders most regional
tables with JavaScript), the row's ``note`` says where the figure comes from:
the team's review that priced the three example stacks, or a
us-east-1 figure scaled by a stated regional ratio. Treat such rows as
±10 %: ``make cost --live`` gives the exact figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

PRICES_READ: Final = "2026-11-28"
# When the first rows were read; the rows added since say read=PRICES_READ.
FIRST_READ: Final = "2026-11-26"
REGIONS: Final = ("us-east-1", "ap-northeast-2", "eu-west-1")
HOURS_PER_MONTH: Final = 730  # AWS's own monthly convention on its pricing pages
# The note of a row ``make cost --live`` could price neither live nor from this
# table (infra/cost/live.py): its line says so and stays out of the total.
NOT_PRICED_LIVE: Final = "not priced live"

EC2_PAGE: Final = "https://aws.amazon.com/ec2/pricing/on-demand/"
EMR_PAGE: Final = "https://aws.amazon.com/emr/pricing/"
EBS_PAGE: Final = "https://aws.amazon.com/ebs/pricing/"
MSK_PAGE: Final = "https://aws.amazon.com/msk/pricing/"
VPC_PAGE: Final = "https://aws.amazon.com/vpc/pricing/"
PRIVATELINK_PAGE: Final = "https://aws.amazon.com/privatelink/pricing/"
KMS_PAGE: Final = "https://aws.amazon.com/kms/pricing/"
CLOUDWATCH_PAGE: Final = "https://aws.amazon.com/cloudwatch/pricing/"
KINESIS_PAGE: Final = "https://aws.amazon.com/kinesis/data-streams/pricing/"
S3_PAGE: Final = "https://aws.amazon.com/s3/pricing/"
GLUE_PAGE: Final = "https://aws.amazon.com/glue/pricing/"

# Notes shared by several rows.
_REVIEW = "the team's review of the example stacks (its totals reproduce with this figure)"
_SEOUL_RATIO = "us-east-1 x 1.23 (ap-northeast-2/us-east-1 ratio of m5.xlarge on the EC2 page)"
_IRELAND_RATIO = "us-east-1 x 1.11 (eu-west-1/us-east-1 ratio of m5.xlarge on the EC2 page)"
_SAME = "the page lists one price for every commercial region"
_SERVERLESS = (
    "x86 figure as the team read it on the page on 2026-11-28 (docs/serverless.md); "
    "no stored copy showed the regional table (it renders with JavaScript)"
)
_ARM = "ARM64: the x86 figure less 20 % (the page's Graviton price)"
_RECALLED = (
    "no stored copy of the page showed this region's table: the figure as last seen "
    "on the page, not re-read (make cost --live gives the exact one)"
)


@dataclass(frozen=True)
class PriceRow:
    """One unit price: ``usd`` per ``unit`` in ``region``, read on ``read`` from ``source``."""

    key: str
    region: str
    usd: float
    unit: str
    source: str
    read: str = FIRST_READ
    note: str = ""


def _rows(
    key: str,
    unit: str,
    source: str,
    by_region: dict[str, tuple[float, str]],
    read: str = FIRST_READ,
) -> tuple[PriceRow, ...]:
    return tuple(
        PriceRow(key, region, usd, unit, source, read=read, note=note)
        for region, (usd, note) in by_region.items()
    )


def _per_region(
    us: float, seoul: float, ireland: float, *, us_note: str, seoul_note: str, ireland_note: str
) -> dict[str, tuple[float, str]]:
    return {
        "us-east-1": (us, us_note),
        "ap-northeast-2": (seoul, seoul_note),
        "eu-west-1": (ireland, ireland_note),
    }


def _noted(us: float, seoul: float, ireland: float, note: str) -> dict[str, tuple[float, str]]:
    """:func:`_per_region` with one note for the three regions."""
    return _per_region(us, seoul, ireland, us_note=note, seoul_note=note, ireland_note=note)


def _serverless(
    key: str, unit: str, us: float, seoul: float, *, arm_digits: int | None = None
) -> tuple[PriceRow, ...]:
    """An EMR Serverless row from the x86 figures (eu-west-1 lists us-east-1's);
    with ``arm_digits``, the ARM64 row: 20 % less, rounded to that many digits."""
    note = _SERVERLESS
    if arm_digits is not None:
        us, seoul, note = round(us * 0.8, arm_digits), round(seoul * 0.8, arm_digits), _ARM
    return _rows(key, unit, EMR_PAGE, _noted(us, seoul, us, note), read=PRICES_READ)


def _ec2(instance: str, us: float, seoul: float, ireland: float) -> tuple[PriceRow, ...]:
    return _rows(
        f"ec2:{instance}",
        "instance-hour",
        EC2_PAGE,
        _per_region(
            us,
            seoul,
            ireland,
            us_note="Linux on-demand",
            seoul_note="Linux on-demand; " + _REVIEW
            if instance.startswith("m5.")
            else _SEOUL_RATIO,
            ireland_note=(
                "Linux on-demand; " + _REVIEW if instance.startswith("m5.") else _IRELAND_RATIO
            ),
        ),
    )


def _emr(instance: str, fee: float) -> tuple[PriceRow, ...]:
    """The EMR fee on top of EC2. The page lists the same fee in these regions
    for these types (the review's EMR totals reproduce with it)."""
    return _rows(
        f"emr:{instance}",
        "instance-hour",
        EMR_PAGE,
        _per_region(fee, fee, fee, us_note="", seoul_note=_REVIEW, ireland_note=_REVIEW),
    )


def _flat(
    key: str, unit: str, source: str, usd: float, note: str = _SAME, *, read: str = FIRST_READ
) -> tuple[PriceRow, ...]:
    return _rows(key, unit, source, _noted(usd, usd, usd, note), read=read)


# The node types priced, one row each: (type, EC2 on-demand USD per hour in
# us-east-1, ap-northeast-2, eu-west-1; the EMR fee per hour). infra/sizing.py
# lists the sized types.
_NODE_TYPES: Final[tuple[tuple[str, float, float, float, float], ...]] = (
    ("m5.xlarge", 0.192, 0.236, 0.214, 0.048),
    ("m5.2xlarge", 0.384, 0.472, 0.428, 0.096),
    ("m5.4xlarge", 0.768, 0.944, 0.856, 0.192),
    ("m6g.xlarge", 0.154, 0.189, 0.171, 0.0385),
    ("m6g.2xlarge", 0.308, 0.379, 0.342, 0.077),
    ("m7g.large", 0.0816, 0.1004, 0.0906, 0.0204),
    ("m7g.xlarge", 0.1632, 0.2007, 0.1812, 0.0408),
    ("m7g.2xlarge", 0.3264, 0.4015, 0.3623, 0.0816),
    ("r5.xlarge", 0.252, 0.310, 0.280, 0.063),
    ("r5.2xlarge", 0.504, 0.620, 0.559, 0.126),
    ("c5.2xlarge", 0.34, 0.418, 0.377, 0.085),
)


PRICE_ROWS: Final[tuple[PriceRow, ...]] = (
    # EC2 on-demand, Linux (EMR nodes), then the EMR fee per instance-hour on
    # top of EC2, for every node type of :data:`_NODE_TYPES`.
    *(row for node in _NODE_TYPES for row in _ec2(*node[:4])),
    *(row for node in _NODE_TYPES for row in _emr(node[0], node[4])),
    # EBS volumes EMR attaches (gp2 by default on the sizes it picks; the
    # review priced them at $0.10 in every region).
    *_rows(
        "ebs:gp2",
        "GiB-month",
        EBS_PAGE,
        _per_region(0.10, 0.114, 0.11, us_note="", seoul_note=_RECALLED, ireland_note=_RECALLED),
    ),
    # MSK provisioned, standard brokers.
    *_rows(
        "msk:kafka.m5.large",
        "broker-hour",
        MSK_PAGE,
        _per_region(0.21, 0.236, 0.226, us_note="", seoul_note=_REVIEW, ireland_note=_REVIEW),
    ),
    *_rows(
        "msk:kafka.m7g.large",
        "broker-hour",
        MSK_PAGE,
        _per_region(
            0.204,
            0.229,
            0.220,
            us_note="as seen by the team in 2026-11 (not re-read from a stored page)",
            seoul_note="us-east-1 x the kafka.m5.large ratio",
            ireland_note="us-east-1 x the kafka.m5.large ratio",
        ),
    ),
    *_rows(
        "msk:kafka.t3.small",
        "broker-hour",
        MSK_PAGE,
        _per_region(
            0.0456,
            0.0513,
            0.0492,
            us_note="",
            seoul_note="us-east-1 x the kafka.m5.large ratio",
            ireland_note="us-east-1 x the kafka.m5.large ratio",
        ),
    ),
    *_rows(
        "msk:storage",
        "GiB-month",
        MSK_PAGE,
        _per_region(
            0.10, 0.114, 0.11, us_note="broker storage", seoul_note=_REVIEW, ireland_note=_REVIEW
        ),
    ),
    # Enhanced monitoring above DEFAULT bills its metrics as CloudWatch custom
    # metrics (MSK page, "Monitoring"); PER_BROKER adds ~30 per broker.
    *_flat(
        "cloudwatch:metric",
        "metric-month",
        CLOUDWATCH_PAGE,
        0.30,
        "first 10,000 metrics tier; the same in these regions",
    ),
    *_flat(
        "cloudwatch:alarm",
        "alarm-month",
        CLOUDWATCH_PAGE,
        0.10,
        "standard-resolution metric alarm; the account's first 10 are free (not counted)",
    ),
    *_flat(
        "cloudwatch:dashboard",
        "dashboard-month",
        CLOUDWATCH_PAGE,
        3.00,
        "the account's first 3 are free (not counted)",
    ),
    *_flat("cloudwatch:put-metric-data", "1,000 requests", CLOUDWATCH_PAGE, 0.01),
    # Network.
    *_rows(
        "vpc:nat-gateway",
        "gateway-hour",
        VPC_PAGE,
        _per_region(0.045, 0.059, 0.048, us_note="", seoul_note=_REVIEW, ireland_note=_REVIEW),
    ),
    *_flat(
        "vpc:public-ipv4",
        "address-hour",
        VPC_PAGE,
        0.005,
        "every public IPv4 address, in use or idle",
    ),
    *_rows(
        "vpc:interface-endpoint",
        "endpoint-AZ-hour",
        PRIVATELINK_PAGE,
        _per_region(
            0.01, 0.013, 0.011, us_note="", seoul_note=_SEOUL_RATIO, ireland_note=_IRELAND_RATIO
        ),
    ),
    *_flat("kms:key", "key-month", KMS_PAGE, 1.00, "customer managed key"),
    # Kinesis Data Streams.
    *_rows(
        "kinesis:shard",
        "shard-hour",
        KINESIS_PAGE,
        _per_region(
            0.015, 0.0179, 0.017, us_note="provisioned", seoul_note=_REVIEW, ireland_note=_REVIEW
        ),
    ),
    *_rows(
        "kinesis:extended-retention",
        "shard-hour",
        KINESIS_PAGE,
        _per_region(
            0.02,
            0.0239,
            0.0227,
            us_note="24 h to 7 days, provisioned",
            seoul_note=_REVIEW,
            ireland_note="us-east-1 x the shard-hour ratio",
        ),
    ),
    *_rows(
        "kinesis:put-payload-unit",
        "million units",
        KINESIS_PAGE,
        _per_region(
            0.014,
            0.0167,
            0.0159,
            us_note="a 25 KB chunk of a record, provisioned",
            seoul_note="us-east-1 x the shard-hour ratio",
            ireland_note="us-east-1 x the shard-hour ratio",
        ),
    ),
    *_rows(
        "kinesis:on-demand-stream",
        "stream-hour",
        KINESIS_PAGE,
        _per_region(
            0.04,
            0.046,
            0.045,
            us_note="",
            seoul_note=_REVIEW,
            ireland_note="us-east-1 x the shard-hour ratio",
        ),
    ),
    *_rows(
        "kinesis:on-demand-in",
        "GB",
        KINESIS_PAGE,
        _per_region(
            0.08,
            0.092,
            0.09,
            us_note="data in, records rounded up to 1 KB",
            seoul_note="us-east-1 x the stream-hour ratio",
            ireland_note="us-east-1 x the shard-hour ratio",
        ),
    ),
    *_rows(
        "kinesis:on-demand-out",
        "GB",
        KINESIS_PAGE,
        _per_region(
            0.04,
            0.046,
            0.045,
            us_note="data out (shared throughput)",
            seoul_note="us-east-1 x the stream-hour ratio",
            ireland_note="us-east-1 x the shard-hour ratio",
        ),
    ),
    # EMR Serverless: per vCPU-hour, per GB-hour of worker memory,
    # per GB-hour of worker storage beyond the 20 GB each worker gets free;
    # billed per second with a one-minute minimum per worker. ARM64 (Graviton)
    # is 20 % less than x86 (the page; AWS Big Data Blog, "Achieve up to 27%
    # better price-performance for Spark workloads with AWS Graviton2 on Amazon
    # EMR Serverless"). eu-west-1 lists the us-east-1 figures.
    *_serverless("emr-serverless:vcpu-x86", "vCPU-hour", 0.052624, 0.060528),
    *_serverless("emr-serverless:gb-x86", "GB-hour", 0.0057785, 0.006643),
    *_serverless("emr-serverless:vcpu-arm", "vCPU-hour", 0.052624, 0.060528, arm_digits=7),
    *_serverless("emr-serverless:gb-arm", "GB-hour", 0.0057785, 0.006643, arm_digits=8),
    *_flat(
        "emr-serverless:storage",
        "GB-hour",
        EMR_PAGE,
        0.000111,
        "worker storage beyond 20 GB a worker; " + _SERVERLESS,
        read=PRICES_READ,
    ),
    # NAT gateway data processing: every GB through the gateway, either way.
    *_rows(
        "vpc:nat-data",
        "GB",
        VPC_PAGE,
        _per_region(
            0.045,
            0.059,
            0.048,
            us_note="data processed",
            seoul_note="data processed; the page lists the hourly rate for it too",
            ireland_note="data processed; the page lists the hourly rate for it too",
        ),
        read=PRICES_READ,
    ),
    # Kinesis enhanced fan-out (provisioned streams): per consumer-shard-hour,
    # and per GB the consumer retrieves.
    *_rows(
        "kinesis:efo-consumer-shard",
        "consumer-shard-hour",
        KINESIS_PAGE,
        _per_region(
            0.015,
            0.0179,
            0.017,
            us_note="enhanced fan-out, provisioned",
            seoul_note="us-east-1 x the shard-hour ratio",
            ireland_note="us-east-1 x the shard-hour ratio",
        ),
        read=PRICES_READ,
    ),
    *_rows(
        "kinesis:efo-data",
        "GB",
        KINESIS_PAGE,
        _per_region(
            0.013,
            0.0155,
            0.0147,
            us_note="enhanced fan-out data retrieval, provisioned",
            seoul_note="us-east-1 x the shard-hour ratio",
            ireland_note="us-east-1 x the shard-hour ratio",
        ),
        read=PRICES_READ,
    ),
    # On-demand streams bill enhanced fan-out per GB retrieved (the page's
    # on-demand tab lists Enhanced Fan-Out among the optional charges).
    *_rows(
        "kinesis:on-demand-efo-data",
        "GB",
        KINESIS_PAGE,
        _per_region(
            0.05,
            0.0575,
            0.0563,
            us_note=_RECALLED,
            seoul_note="us-east-1 x the stream-hour ratio; " + _RECALLED,
            ireland_note="us-east-1 x the stream-hour ratio; " + _RECALLED,
        ),
        read=PRICES_READ,
    ),
    # S3 standard and the Glue Data Catalog.
    *_rows(
        "s3:put",
        "1,000 requests",
        S3_PAGE,
        _per_region(
            0.005,
            0.0045,
            0.005,
            us_note="PUT, COPY, POST, LIST",
            seoul_note=_RECALLED,
            ireland_note=_RECALLED,
        ),
    ),
    *_rows(
        "s3:get",
        "1,000 requests",
        S3_PAGE,
        _per_region(
            0.0004,
            0.00035,
            0.0004,
            us_note="GET, SELECT and others",
            seoul_note=_RECALLED,
            ireland_note=_RECALLED,
        ),
    ),
    *_rows(
        "s3:storage",
        "GB-month",
        S3_PAGE,
        _per_region(
            0.023,
            0.025,
            0.023,
            us_note="S3 Standard, first 50 TB",
            seoul_note=_RECALLED,
            ireland_note=_RECALLED,
        ),
    ),
    *_flat(
        "glue:catalog-request",
        "million requests",
        GLUE_PAGE,
        1.00,
        "Data Catalog requests beyond the account's free first million a month",
    ),
)


class UnknownPriceError(KeyError):
    """No row for a resource the template bills by: the estimate would be wrong
    silently, so it stops and names the row to add."""


def price_index(rows: tuple[PriceRow, ...] = PRICE_ROWS) -> dict[tuple[str, str], PriceRow]:
    return {(row.key, row.region): row for row in rows}


def price(key: str, region: str, rows: tuple[PriceRow, ...] = PRICE_ROWS) -> PriceRow:
    """The row for ``key`` in ``region``; :class:`UnknownPriceError` names what is missing."""
    found = price_index(rows).get((key, region))
    if found is None:
        regions = sorted({row.region for row in rows if row.key == key})
        raise UnknownPriceError(
            f"no price for {key!r} in {region}: infra/cost/prices.py has it for "
            f"{', '.join(regions) or 'no region'}; add a row citing its AWS pricing page"
        )
    return found
