"""``make cost ARGS=--live``: EC2 and EMR-fee unit prices from the AWS Price
List API instead of infra/prices.py's rows, where credentials exist.

Only the instance-hour rows are read live: they are most of every estimate
(EMR is ~45-80 % of it) and the API's attributes for them are stable
(``instanceType``, ``regionCode``; EC2: Linux, shared tenancy, no
pre-installed software, ``capacitystatus`` Used; EMR: ``softwareType`` EMR).
Every other row stays the table's, and the output says which rows are live.
The Price List API answers from us-east-1 for every region
(https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-price-list-query-api.html).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Final

from infra.prices import PriceRow

PRICING_REGION: Final = "us-east-1"
_SERVICES: Final = {
    "ec2": (
        "AmazonEC2",
        {
            "operatingSystem": "Linux",
            "tenancy": "Shared",
            "preInstalledSw": "NA",
            "capacitystatus": "Used",
        },
    ),
    "emr": ("ElasticMapReduce", {"softwareType": "EMR"}),
}


def filters_for(row: PriceRow) -> tuple[str, list[dict[str, str]]] | None:
    """The ``get_products`` service code and filters of a live-readable row, else None."""
    kind, _, instance_type = row.key.partition(":")
    if kind not in _SERVICES:
        return None
    service, fixed = _SERVICES[kind]
    wanted = {"instanceType": instance_type, "regionCode": row.region, **fixed}
    return service, [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in wanted.items()]


def on_demand_usd(price_list: Iterable[str]) -> float | None:
    """The first non-zero on-demand hourly USD price of a ``PriceList`` page."""
    for item in price_list:
        product: dict[str, Any] = json.loads(item)
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = float(dimension.get("pricePerUnit", {}).get("USD", "0"))
                if usd > 0:
                    return usd
    return None


def live_rows(client: Any, rows: Iterable[PriceRow], regions: set[str]) -> tuple[PriceRow, ...]:
    """``rows`` with the instance-hour rows of ``regions`` replaced by the API's
    figure (source and date say so); a row the API has no product for keeps
    the table's figure and says that in its note."""
    today = datetime.now(UTC).date().isoformat()
    out: list[PriceRow] = []
    for row in rows:
        query = filters_for(row) if row.region in regions else None
        if query is None:
            out.append(row)
            continue
        service, filters = query
        answer = client.get_products(ServiceCode=service, Filters=filters, MaxResults=10)
        usd = on_demand_usd(answer.get("PriceList", []))
        if usd is None:
            out.append(replace(row, note=f"{row.note}; live: no {service} product, table figure"))
        else:
            out.append(
                replace(
                    row,
                    usd=usd,
                    source=f"AWS Price List API (GetProducts, {service})",
                    read=today,
                    note="live",
                )
            )
    return tuple(out)
