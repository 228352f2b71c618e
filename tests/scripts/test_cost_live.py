"""``make cost --live`` (scripts/cost_live.py) against a stubbed Price List
API: botocore's Stubber checks the request shape moto cannot (no ``pricing``)."""

from __future__ import annotations

import json

import boto3
from botocore.stub import Stubber

from infra.prices import PRICE_ROWS, price
from scripts.cost_live import filters_for, live_rows, on_demand_usd


def _product(usd: str) -> str:
    dimension = {"unit": "Hrs", "pricePerUnit": {"USD": usd}}
    return json.dumps({"terms": {"OnDemand": {"SKU.T": {"priceDimensions": {"D": dimension}}}}})


def test_the_instance_hour_rows_are_read_live_the_others_stay_the_tables() -> None:
    rows = tuple(
        r
        for r in PRICE_ROWS
        if r.region == "eu-west-1" and r.key in ("ec2:m5.xlarge", "emr:m5.xlarge", "kms:key")
    )
    client = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    ec2 = filters_for(price("ec2:m5.xlarge", "eu-west-1"))
    emr = filters_for(price("emr:m5.xlarge", "eu-west-1"))
    assert ec2 is not None and emr is not None
    with Stubber(client) as stub:
        stub.add_response(
            "get_products",
            {"PriceList": [_product("0.0000000000"), _product("0.2140000000")]},
            {"ServiceCode": "AmazonEC2", "Filters": ec2[1], "MaxResults": 10},
        )
        stub.add_response(
            "get_products",
            {"PriceList": []},
            {"ServiceCode": "ElasticMapReduce", "Filters": emr[1], "MaxResults": 10},
        )
        found = {r.key: r for r in live_rows(client, rows, {"eu-west-1"})}
        stub.assert_no_pending_responses()
    assert found["ec2:m5.xlarge"].usd == 0.214 and found["ec2:m5.xlarge"].note == "live"
    assert "Price List API" in found["ec2:m5.xlarge"].source
    # No product: the table's figure, and the note says so.
    assert found["emr:m5.xlarge"].usd == price("emr:m5.xlarge", "eu-west-1").usd
    assert "no ElasticMapReduce product" in found["emr:m5.xlarge"].note
    assert found["kms:key"] == price("kms:key", "eu-west-1"), "not read live"


def test_the_ec2_filters_ask_for_linux_shared_tenancy_in_the_region() -> None:
    query = filters_for(price("ec2:m7g.xlarge", "ap-northeast-2"))
    assert query is not None
    service, filters = query
    fields = {f["Field"]: f["Value"] for f in filters}
    assert service == "AmazonEC2"
    assert fields["instanceType"] == "m7g.xlarge" and fields["regionCode"] == "ap-northeast-2"
    assert fields["operatingSystem"] == "Linux" and fields["tenancy"] == "Shared"
    assert filters_for(price("kms:key", "us-east-1")) is None


def test_a_price_list_of_zeros_has_no_price() -> None:
    assert on_demand_usd([_product("0.00")]) is None
    assert on_demand_usd([_product("0.00"), _product("0.5")]) == 0.5
