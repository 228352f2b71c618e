"""``make cost ARGS=--live``: every unit price of the estimate from the AWS
Price List API instead of infra/cost/prices.py's rows, where credentials exist,
in any Region (one the table has no row for too).

Each price key of the table (``ec2:m7g.xlarge``, ``s3:put``, ...) maps to one
GetProducts query (:data:`QUERIES`): a service code and ``TERM_MATCH`` filters
on the product's attributes plus ``regionCode``, the only filter type the API
reference documents
(https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_pricing_Filter.html;
service codes and attribute names as the API's DescribeServices and
GetAttributeValues return them,
https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html).
Usage types carry a Region prefix (``APN2-NatGateway-Hours``; none in
us-east-1), so the query asks for the product family and the answer is
matched on the usage type's suffix here. The usage-type names are those the
public cost estimator infracost queries (github.com/infracost/infracost,
``internal/resources/aws``); this repository has no account to read them back.

A price the API does not give (no matching product, an error answering) keeps
the table's figure and says so in its note; where the table has none either,
the line is printed "not priced live" with the reason and left out of the
total, which says how many lines it lacks: never a crash, never a silent 0.
The Price List API answers from us-east-1 for every Region (same page).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final

from botocore.exceptions import ClientError

from infra.cost.prices import NOT_PRICED_LIVE, PriceRow, price_index

PRICING_REGION: Final = "us-east-1"
PAGES: Final = 5  # GetProducts pages read per query (100 products each)


@dataclass(frozen=True)
class Query:
    """One price key's GetProducts query.

    ``filters``: TERM_MATCH attribute values (``regionCode`` is added);
    ``usagetype``: the suffix the product's usage type must end with (after
    the Region prefix), or with ``contains`` anywhere in it; ``per``: API
    units in one table unit (the table prices S3 per 1,000 requests, the API
    per request)."""

    service: str
    filters: tuple[tuple[str, str], ...]
    usagetype: str = ""
    contains: bool = False
    per: float = 1.0

    def matches(self, attributes: Mapping[str, str]) -> bool:
        if not self.usagetype:
            return True
        found = attributes.get("usagetype", "")
        if self.contains:
            return self.usagetype.lower() in found.lower()
        return found == self.usagetype or found.endswith("-" + self.usagetype)


_EC2_LINUX: Final = (
    ("operatingSystem", "Linux"),
    ("tenancy", "Shared"),
    ("preInstalledSw", "NA"),
    ("capacitystatus", "Used"),
)
_MSK: Final = (("productFamily", "Managed Streaming for Apache Kafka (MSK)"),)
_KINESIS: Final = (("productFamily", "Kinesis Streams"),)
_CLOUDWATCH: Final = "AmazonCloudWatch"


def _kinesis(usagetype: str, per: float = 1.0) -> Query:
    return Query("AmazonKinesis", _KINESIS, usagetype, per=per)


def _serverless(usagetype: str) -> Query:
    return Query("ElasticMapReduce", (), usagetype)


# The keys of infra/cost/prices.py without an instance type, one query each.
QUERIES: Final[dict[str, Query]] = {
    "ebs:gp2": Query("AmazonEC2", (("productFamily", "Storage"), ("volumeApiName", "gp2"))),
    "msk:storage": Query("AmazonMSK", (*_MSK, ("storageFamily", "GP2"))),
    "cloudwatch:metric": Query(
        _CLOUDWATCH, (("productFamily", "Metric"),), "CW:MetricMonitorUsage"
    ),
    "cloudwatch:alarm": Query(_CLOUDWATCH, (("productFamily", "Alarm"),), "CW:AlarmMonitorUsage"),
    "cloudwatch:dashboard": Query(_CLOUDWATCH, (("productFamily", "Dashboard"),)),
    "cloudwatch:put-metric-data": Query(
        _CLOUDWATCH, (("productFamily", "API Request"),), "CW:Requests", per=1000
    ),
    "vpc:nat-gateway": Query("AmazonEC2", (("productFamily", "NAT Gateway"),), "NatGateway-Hours"),
    "vpc:nat-data": Query("AmazonEC2", (("productFamily", "NAT Gateway"),), "NatGateway-Bytes"),
    "vpc:public-ipv4": Query(
        "AmazonVPC", (("productFamily", "VPC Public IPv4 Address"),), "PublicIPv4:InUseAddress"
    ),
    "vpc:interface-endpoint": Query(
        "AmazonVPC", (("productFamily", "VpcEndpoint"),), "VpcEndpoint-Hours"
    ),
    "kms:key": Query("awskms", (("productFamily", "Encryption Key"),), "KMS-Keys"),
    "kinesis:shard": _kinesis("Storage-ShardHour"),
    "kinesis:extended-retention": _kinesis("Extended-ShardHour"),
    "kinesis:put-payload-unit": _kinesis("PutRequestPayloadUnits", per=1e6),
    "kinesis:on-demand-stream": _kinesis("OnDemand-StreamHour"),
    "kinesis:on-demand-in": _kinesis("OnDemand-BilledIncomingBytes"),
    "kinesis:on-demand-out": _kinesis("OnDemand-BilledOutgoingBytes"),
    "kinesis:on-demand-efo-data": _kinesis("OnDemand-BilledOutgoingEFOBytes"),
    "kinesis:efo-consumer-shard": _kinesis("EnhancedFanoutConsumerShardHour"),
    "kinesis:efo-data": _kinesis("EnhancedFanoutBytes"),
    "emr-serverless:vcpu-x86": _serverless("EMR-SERVERLESS-vCPUHours"),
    "emr-serverless:gb-x86": _serverless("EMR-SERVERLESS-GBHours"),
    "emr-serverless:vcpu-arm": _serverless("EMR-SERVERLESS-ARM-vCPUHours"),
    "emr-serverless:gb-arm": _serverless("EMR-SERVERLESS-ARM-GBHours"),
    "emr-serverless:storage": _serverless("EMR-SERVERLESS-StorageGBHours"),
    "s3:put": Query(
        "AmazonS3", (("productFamily", "API Request"), ("group", "S3-API-Tier1")), per=1000
    ),
    "s3:get": Query(
        "AmazonS3", (("productFamily", "API Request"), ("group", "S3-API-Tier2")), per=1000
    ),
    "s3:storage": Query("AmazonS3", (("productFamily", "Storage"), ("volumeType", "Standard"))),
    "glue:catalog-request": Query(
        "AWSGlue", (("productFamily", "AWS Glue"), ("group", "Data Catalog Requests")), per=1e6
    ),
}


def query_for(key: str) -> Query | None:
    """The query of a price key; the instance types' keys carry their type."""
    kind, _, instance_type = key.partition(":")
    if kind == "ec2":
        return Query("AmazonEC2", (("instanceType", instance_type), *_EC2_LINUX))
    if kind == "emr":
        return Query("ElasticMapReduce", (("instanceType", instance_type), ("softwareType", "EMR")))
    if kind == "msk":
        if key in QUERIES:
            return QUERIES[key]
        return Query("AmazonMSK", _MSK, instance_type, contains=True)
    return QUERIES.get(key)


def filters_for(query: Query, region: str) -> list[dict[str, str]]:
    """GetProducts' ``Filters`` of ``query`` in ``region``."""
    wanted = (*query.filters, ("regionCode", region))
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in wanted]


def on_demand_usd(price_list: Iterable[str], query: Query | None = None) -> float | None:
    """The on-demand USD price of the first product of a ``PriceList`` that
    ``query`` matches: its first priced tier (the lowest ``beginRange``; a
    free tier at 0 USD is skipped), in the table's unit."""
    for item in price_list:
        product: dict[str, Any] = json.loads(item)
        attributes = product.get("product", {}).get("attributes", {})
        if query is not None and not query.matches(attributes):
            continue
        tiers = [
            (float(dimension.get("beginRange", "0") or 0), float(usd))
            for term in product.get("terms", {}).get("OnDemand", {}).values()
            for dimension in term.get("priceDimensions", {}).values()
            for usd in [dimension.get("pricePerUnit", {}).get("USD", "0")]
            if float(usd) > 0
        ]
        if tiers:
            return min(tiers)[1] * (query.per if query is not None else 1.0)
    return None


def live_price(client: Any, key: str, region: str) -> tuple[float | None, str]:
    """(USD per table unit, or None; the service code or why not)."""
    query = query_for(key)
    if query is None:
        return None, "no Price List query for this key"
    token: str | None = None
    try:
        for _ in range(PAGES):
            request: dict[str, Any] = {
                "ServiceCode": query.service,
                "Filters": filters_for(query, region),
                "MaxResults": 100,
            }
            if token:
                request["NextToken"] = token
            answer = client.get_products(**request)
            usd = on_demand_usd(answer.get("PriceList", []), query)
            if usd is not None:
                return usd, query.service
            token = answer.get("NextToken")
            if not token:
                break
    except ClientError as exc:
        return None, f"{query.service} answered {exc.response.get('Error', {}).get('Code')}"
    return None, f"no {query.service} product"


def live_rows(client: Any, rows: Iterable[PriceRow], regions: set[str]) -> tuple[PriceRow, ...]:
    """Every price key of ``rows`` in each of ``regions`` read from the API
    (source and date say so). Not found live: the table's row, its note
    saying so; not in the table either: a "not priced live" row at 0 USD,
    which the estimate prints as such and leaves out of its total."""
    rows = tuple(rows)
    today = datetime.now(UTC).date().isoformat()
    table = price_index(rows)
    units = {row.key: row.unit for row in rows}
    out = [row for row in rows if row.region not in regions]
    for region in sorted(regions):
        for key, unit in units.items():
            usd, why = live_price(client, key, region)
            known = table.get((key, region))
            if usd is not None:
                source = f"AWS Price List API (GetProducts, {why})"
                out.append(PriceRow(key, region, usd, unit, source, read=today, note="live"))
            elif known is not None:
                out.append(replace(known, note=f"{known.note}; live: {why}, table figure"))
            else:
                note = f"{NOT_PRICED_LIVE}: {why}, and infra/cost/prices.py has no {region} row"
                out.append(PriceRow(key, region, 0.0, unit, "AWS Price List API", today, note))
    return tuple(out)
