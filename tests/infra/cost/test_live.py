"""``make cost --live`` (infra/cost/live.py) against a stubbed Price List
API: botocore's Stubber checks each request's shape (service code, filters)
as the API's model defines it; moto has no ``pricing``."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from infra.cost.estimate import estimate, render
from infra.cost.lines import Load
from infra.cost.live import QUERIES, filters_for, live_rows, on_demand_usd, query_for
from infra.cost.prices import NOT_PRICED_LIVE, PRICE_ROWS, PriceRow, price


def _product(usd: str, usagetype: str = "", begin: str = "0") -> str:
    dimension = {"unit": "Hrs", "beginRange": begin, "pricePerUnit": {"USD": usd}}
    return json.dumps(
        {
            "product": {"attributes": {"usagetype": usagetype}},
            "terms": {"OnDemand": {"SKU.T": {"priceDimensions": {"D": dimension}}}},
        }
    )


def _client() -> Any:
    return boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )


def _expect(stub: Stubber, key: str, region: str, price_list: list[str]) -> None:
    query = query_for(key)
    assert query is not None
    stub.add_response(
        "get_products",
        {"PriceList": price_list},
        {"ServiceCode": query.service, "Filters": filters_for(query, region), "MaxResults": 100},
    )


def _rows(*keys: str) -> tuple[PriceRow, ...]:
    return tuple(r for r in PRICE_ROWS if r.key in keys and r.region == "us-east-1")


def test_every_kind_of_line_the_table_prices_has_a_live_query() -> None:
    kinds = {row.key for row in PRICE_ROWS}
    assert not [key for key in sorted(kinds) if query_for(key) is None]
    assert set(QUERIES) <= kinds, "no query for a key the table does not have"


def test_a_region_without_table_rows_is_priced_live_line_by_line() -> None:
    """us-west-2 has no row in infra/cost/prices.py: each key is asked for, by the
    usage type's suffix after the Region prefix; S3 is per request in the API
    and per 1,000 in the table."""
    client = _client()
    with Stubber(client) as stub:  # in the table's order
        _expect(stub, "kms:key", "us-west-2", [])
        _expect(
            stub,
            "kinesis:shard",
            "us-west-2",
            [
                _product("0.02", "USW2-Extended-ShardHour"),
                _product("0.015", "USW2-Storage-ShardHour"),
            ],
        )
        _expect(stub, "s3:put", "us-west-2", [_product("0.000005", "USW2-Requests-Tier1")])
        found = {
            r.key: r
            for r in live_rows(client, _rows("kinesis:shard", "s3:put", "kms:key"), {"us-west-2"})
        }
        stub.assert_no_pending_responses()
    assert found["kinesis:shard"].usd == 0.015 and found["kinesis:shard"].note == "live"
    assert found["kinesis:shard"].region == "us-west-2"
    assert "AmazonKinesis" in found["kinesis:shard"].source
    assert found["s3:put"].usd == pytest.approx(0.005)
    # Neither live nor in the table: a line that says so, not a crash.
    assert found["kms:key"].note.startswith(NOT_PRICED_LIVE)
    assert "no awskms product" in found["kms:key"].note


def test_a_price_the_api_lacks_or_refuses_keeps_the_tables_figure_and_says_so() -> None:
    client = _client()
    with Stubber(client) as stub:
        _expect(stub, "ec2:m5.xlarge", "eu-west-1", [_product("0.0"), _product("0.214")])
        query = query_for("emr:m5.xlarge")
        assert query is not None
        stub.add_client_error(
            "get_products",
            service_error_code="ThrottlingException",
            expected_params={
                "ServiceCode": "ElasticMapReduce",
                "Filters": filters_for(query, "eu-west-1"),
                "MaxResults": 100,
            },
        )
        rows = tuple(
            r
            for r in PRICE_ROWS
            if r.region == "eu-west-1" and r.key in ("ec2:m5.xlarge", "emr:m5.xlarge")
        )
        found = {r.key: r for r in live_rows(client, rows, {"eu-west-1"})}
        stub.assert_no_pending_responses()
    assert found["ec2:m5.xlarge"].usd == 0.214 and found["ec2:m5.xlarge"].note == "live"
    assert found["emr:m5.xlarge"].usd == price("emr:m5.xlarge", "eu-west-1").usd
    assert "ThrottlingException, table figure" in found["emr:m5.xlarge"].note


def test_a_line_not_priced_live_is_printed_as_such_and_left_out_of_the_total() -> None:
    rows = (
        PriceRow("kms:key", "us-west-2", 1.0, "key-month", "AWS Price List API", note="live"),
        PriceRow(
            "cloudwatch:alarm",
            "us-west-2",
            0.0,
            "alarm-month",
            "x",
            note=f"{NOT_PRICED_LIVE}: no product",
        ),
    )
    template = {
        "Resources": {
            "Key": {"Type": "AWS::KMS::Key", "Properties": {}},
            "Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {}},
        }
    }
    found = estimate("S", template, "us-west-2", Load(0, 1024, 1), rows)
    assert found.total_usd == 1.0 and len(found.unpriced) == 1
    text = render(found)
    assert f"{NOT_PRICED_LIVE}: no product" in text
    assert "total a month (1 lines not priced)" in text


def test_the_ec2_filters_ask_for_linux_shared_tenancy_in_the_region() -> None:
    query = query_for("ec2:m7g.xlarge")
    assert query is not None
    fields = {f["Field"]: f["Value"] for f in filters_for(query, "ap-northeast-2")}
    assert query.service == "AmazonEC2"
    assert fields["instanceType"] == "m7g.xlarge" and fields["regionCode"] == "ap-northeast-2"
    assert fields["operatingSystem"] == "Linux" and fields["tenancy"] == "Shared"
    assert {f["Type"] for f in filters_for(query, "ap-northeast-2")} == {"TERM_MATCH"}


def test_the_first_priced_tier_in_the_tables_unit() -> None:
    assert on_demand_usd([_product("0.00")]) is None
    assert on_demand_usd([_product("0.00"), _product("0.5")]) == 0.5
    metric = query_for("cloudwatch:metric")
    tiers = json.dumps(
        {
            "product": {"attributes": {"usagetype": "APN2-CW:MetricMonitorUsage"}},
            "terms": {
                "OnDemand": {
                    "T": {
                        "priceDimensions": {
                            "b": {"beginRange": "10000", "pricePerUnit": {"USD": "0.1"}},
                            "a": {"beginRange": "0", "pricePerUnit": {"USD": "0.3"}},
                        }
                    }
                }
            },
        }
    )
    assert on_demand_usd([tiers], metric) == 0.3
    # The x86 vCPU query does not take the ARM64 product.
    x86 = query_for("emr-serverless:vcpu-x86")
    arm = _product("0.04", "APN2-EMR-SERVERLESS-ARM-vCPUHours")
    assert on_demand_usd([arm], x86) is None
    assert on_demand_usd([arm], query_for("emr-serverless:vcpu-arm")) == 0.04
