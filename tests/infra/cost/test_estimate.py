"""``make cost``'s estimate (infra/cost/estimate.py) against the price table
(infra/cost/prices.py): one stack recomputed by hand from its template, the table's
rows each citing a page and a date, the small shared shape under $450, and
the errors that keep an estimate from being silently low."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date
from typing import Any

import pytest

from infra.cost.estimate import estimate, load_for, render, synth_line
from infra.cost.lines import Load
from infra.cost.prices import PRICE_ROWS, PRICES_READ, REGIONS, UnknownPriceError
from infra.cost.requests import read_counts
from tests.fixtures import EXAMPLE_CDK_JSON
from tests.infra.conftest import Synthesized, check_context, synthesize

HOURS = 730
SECONDS = 730 * 3600
SHARED_ARN = "arn:aws:kafka:us-east-1:123456789012:cluster/streaming-failures/0b1c2d3e-aaaa-bbbb"


def _usd(key: str, region: str) -> float:
    (found,) = [row.usd for row in PRICE_ROWS if row.key == key and row.region == region]
    return found


def _of_type(template: dict[str, Any], type_: str) -> list[dict[str, Any]]:
    return [r.get("Properties", {}) for r in template["Resources"].values() if r["Type"] == type_]


def _by_the_load(
    target: str, rate: float, size: int, trigger: float, p: Callable[[str], float]
) -> float:
    """A month of ``rate`` records/s of ``size`` bytes, one batch per
    ``trigger`` seconds, by hand: the same on either compute target but for
    the requests per batch, which are measured on each
    (infra/cost/request_counts.json)."""
    records, batches = rate * SECONDS, SECONDS / trigger
    measured = read_counts()[target]
    usd = records / 1e6 * p("kinesis:put-payload-unit")
    usd += batches * measured.s3_put_class / 1000 * p("s3:put")
    usd += batches * measured.s3_get_class / 1000 * p("s3:get")
    usd += batches * measured.glue / 1e6 * p("glue:catalog-request")
    usd += batches * measured.put_metric_data / 1000 * p("cloudwatch:put-metric-data")
    # Kept in S3 and read by the job through the NAT.
    usd += records * size / 1024**3 * (p("s3:storage") + p("vpc:nat-data"))
    # The custom metrics sent in every batch or check: 9 per-batch metrics, the
    # supervisor's 2 (the per-reason failure counts are sent only when a
    # reason occurs: not in the total).
    return usd + (9 + 2) * p("cloudwatch:metric")


# ----------------------------------------------------------------- the table


def test_every_price_row_cites_an_aws_pricing_page_and_the_date_it_was_read() -> None:
    assert len(PRICE_ROWS) > 50
    for row in PRICE_ROWS:
        assert re.fullmatch(r"https://aws\.amazon\.com/[a-z0-9/-]+/", row.source), row
        assert date.fromisoformat(row.read) <= date.fromisoformat(PRICES_READ), row
        assert row.usd > 0 and row.unit, row


def test_every_priced_key_has_each_region_of_the_example_and_the_bar() -> None:
    keys = {row.key for row in PRICE_ROWS}
    have = {(row.key, row.region) for row in PRICE_ROWS}
    missing = sorted((k, r) for k in keys for r in REGIONS if (k, r) not in have)
    assert not missing
    assert len(have) == len(PRICE_ROWS), "one row per key and region"


# ------------------------------------------------------- a stack, by hand


def test_orders_eu_west_1_is_recomputed_by_hand_from_its_template(
    synthesized: Synthesized,
) -> None:
    """Independent arithmetic: the template's resources times the table's
    prices, 730 h a month; EMR's default EBS for an xlarge is 64 GiB plus a
    15 GiB root (docs in infra/cost/lines.py)."""
    name, region = "Streaming-orders-eu-west-1", "eu-west-1"
    template = synthesized.templates[name]
    config = synthesized.config(name)

    def p(key: str) -> float:
        return _usd(key, region)

    expected = 0.0
    (cluster,) = _of_type(template, "AWS::EMR::Cluster")
    groups = cluster["Instances"]
    for group in (groups["MasterInstanceGroup"], groups["CoreInstanceGroup"]):
        n, kind = group["InstanceCount"], group["InstanceType"]
        assert kind == "m5.xlarge"
        expected += n * HOURS * (p(f"ec2:{kind}") + p(f"emr:{kind}")) + n * 79 * p("ebs:gp2")
    (msk,) = _of_type(template, "AWS::MSK::Cluster")
    brokers = msk["NumberOfBrokerNodes"]
    expected += brokers * HOURS * p("msk:kafka.m5.large")
    expected += (
        brokers
        * msk["BrokerNodeGroupInfo"]["StorageInfo"]["EBSStorageInfo"]["VolumeSize"]
        * p("msk:storage")
    )
    assert msk["EnhancedMonitoring"] == "PER_BROKER"
    expected += brokers * 30 * p("cloudwatch:metric")
    expected += len(_of_type(template, "AWS::EC2::NatGateway")) * HOURS * p("vpc:nat-gateway")
    expected += len(_of_type(template, "AWS::EC2::EIP")) * HOURS * p("vpc:public-ipv4")
    expected += len(_of_type(template, "AWS::KMS::Key")) * p("kms:key")
    expected += len(_of_type(template, "AWS::CloudWatch::Alarm")) * p("cloudwatch:alarm")
    expected += len(_of_type(template, "AWS::CloudWatch::Dashboard")) * p("cloudwatch:dashboard")
    (stream,) = _of_type(template, "AWS::Kinesis::Stream")
    assert stream.get("RetentionPeriodHours", 24) == 24
    expected += stream["ShardCount"] * HOURS * p("kinesis:shard")
    # Volume: 50 records/s of 2 KB (a declared load), one batch per 10 s.
    rate, size, trigger = 50.0, 2048, config.job.trigger_interval_sec
    expected += _by_the_load("emr", rate, size, trigger, p)

    found = estimate(name, template, region, Load(rate, size, trigger))
    assert found.total_usd == pytest.approx(expected, rel=1e-9)
    # The team's review of the example stacks put this one at ~$1,300 a month.
    assert 1_150 < found.total_usd < 1_400, render(found)


def test_the_orders_seoul_stack_prices_its_extended_retention_and_bigger_nodes(
    synthesized: Synthesized,
) -> None:
    name = "Streaming-orders-ap-northeast-2"
    found = estimate(name, synthesized.templates[name], "ap-northeast-2", Load(0, 1024, 10))
    lines = {line.resource: line for line in found.lines}
    assert lines["Kinesis extended retention x4"].count == 4 * HOURS
    assert lines["EC2 m5.2xlarge x3 (core)"].unit_usd == _usd("ec2:m5.2xlarge", "ap-northeast-2")
    assert 2_100 < found.total_usd < 2_450, "the example stacks' review: ~$2,330"


def test_an_on_demand_stream_bills_stream_hours_and_gigabytes(synthesized: Synthesized) -> None:
    name = "Streaming-payments-ap-northeast-2"
    found = estimate(name, synthesized.templates[name], "ap-northeast-2", Load(10, 100, 5))
    lines = {line.resource.split(" (")[0]: line for line in found.lines}
    assert lines["Kinesis on-demand stream"].count == HOURS
    # 100-byte records are billed as 1 KB each.
    assert lines["Kinesis on-demand data in"].count == pytest.approx(10 * SECONDS * 1024 / 1024**3)
    assert not any("shards" in line.resource for line in found.lines)


# ------------------------------------------- the small shape on a shared MSK


@pytest.fixture(scope="module")
def small_shared(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """One ``small`` instance in us-east-1 on its region's shared MSK cluster."""
    context = check_context(EXAMPLE_CDK_JSON)
    context = json.loads(json.dumps(context))
    context["streaming"]["instances"] = [
        {
            "domain": "refunds",
            "region": "us-east-1",
            "size": "small",
            "kafka": {"cluster_arn": SHARED_ARN},
            "expected_load": {"records_per_sec": 10},
        }
    ]
    return synthesize(context, tmp_path_factory.mktemp("cdk.out.small"))


@pytest.mark.synth
def test_a_small_instance_on_its_regions_shared_msk_costs_at_most_450_a_month(
    small_shared: Synthesized,
) -> None:
    name = "Streaming-refunds-us-east-1"
    config = small_shared.config(name)
    assert small_shared.error is None, small_shared.error
    found = estimate(name, small_shared.templates[name], "us-east-1", load_for(config))
    assert found.load == Load(10, 1024, 30)
    assert found.total_usd <= 450, render(found)
    resources = [line.resource for line in found.lines]
    assert not any(r.startswith("MSK") for r in resources), "the shared cluster is not its own"
    assert "EC2 m7g.xlarge x1 (core)" in resources
    line = synth_line(config, name, small_shared.templates[name])
    assert line.startswith(f"cost: {name} ~$") and "records/s" in line


# ------------------------------------------------------------ what stops it


def _template(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": resources}


def test_a_region_without_rows_names_the_missing_row_and_synth_still_says_why() -> None:
    kms = {"Type": "AWS::KMS::Key", "Properties": {}}
    with pytest.raises(UnknownPriceError, match=r"'kms:key' in sa-east-1.*us-east-1"):
        estimate("S", _template(Key=kms), "sa-east-1", Load(0, 1024, 10))


def test_control_a_priced_template_gives_lines_with_count_unit_price_and_monthly() -> None:
    kms = {"Type": "AWS::KMS::Key", "Properties": {}}
    found = estimate("S", _template(A=kms, B=kms), "us-east-1", Load(0, 1024, 10))
    (keys,) = [line for line in found.lines if line.resource == "KMS keys x2"]
    assert (keys.count, keys.unit_usd, keys.monthly_usd) == (2, 1.0, 2.0)
    text = render(found)
    assert "KMS keys x2" in text and "$1 / key-month" in text and "total a month" in text


def test_the_synth_line_of_an_unpriced_region_says_why_instead_of_failing() -> None:
    class _Config:
        region = "sa-east-1"
        expected_load = type("E", (), {"records_per_sec": 0.0, "record_bytes": 1024})()
        source = type("S", (), {"consumer_type": "GetRecords"})()
        job = type("J", (), {"trigger_interval_sec": 10, "source": source})()

    kms = {"Type": "AWS::KMS::Key", "Properties": {}}
    line = synth_line(_Config(), "S", _template(A=kms))  # type: ignore[arg-type]
    assert line.startswith("cost: S not estimated: no price for 'kms:key' in sa-east-1")


# ------------------------------------------ a light instance on EMR Serverless


@pytest.mark.synth
def test_a_light_serverless_instance_with_its_shares_costs_at_most_150_a_month(
    synthesized_serverless: Synthesized,
) -> None:
    """The serverless bar, recomputed by hand from the templates and the table:
    one light instance at 10 records/s in us-east-1 on EMR Serverless, sharing
    its region's failure-topic cluster and NAT with four other instances."""
    name, shared, region = "Streaming-light-us-east-1", "Streaming-shared-us-east-1", "us-east-1"
    template = synthesized_serverless.templates[name]
    config = synthesized_serverless.config(name)

    def p(key: str) -> float:
        return _usd(key, region)

    (app,) = _of_type(template, "AWS::EMRServerless::Application")
    assert app["Architecture"] == "ARM64"
    capacity = app["MaximumCapacity"]
    vcpu, memory = float(capacity["Cpu"].split()[0]), float(capacity["Memory"].split()[0])
    # A 1 vCPU / 2 GB driver and a 1 vCPU / 2 GB executor; 2 workers x 20 GB: no extra disk.
    assert (vcpu, memory, capacity["Disk"]) == (2, 4, "40 GB")
    expected = HOURS * (vcpu * p("emr-serverless:vcpu-arm") + memory * p("emr-serverless:gb-arm"))
    # ARM64 is 20 % less than x86 in the table.
    assert p("emr-serverless:vcpu-arm") == pytest.approx(0.8 * p("emr-serverless:vcpu-x86"))
    assert p("emr-serverless:gb-arm") == pytest.approx(0.8 * p("emr-serverless:gb-x86"))
    assert not _of_type(template, "AWS::EMR::Cluster")
    assert not _of_type(template, "AWS::EC2::NatGateway"), "the NAT is the shared stack's"
    expected += len(_of_type(template, "AWS::KMS::Key")) * p("kms:key")
    expected += len(_of_type(template, "AWS::CloudWatch::Alarm")) * p("cloudwatch:alarm")
    expected += len(_of_type(template, "AWS::CloudWatch::Dashboard")) * p("cloudwatch:dashboard")
    (stream,) = _of_type(template, "AWS::Kinesis::Stream")
    expected += stream["ShardCount"] * HOURS * p("kinesis:shard")
    rate, size, trigger = 10.0, 1024, config.job.trigger_interval_sec
    expected += _by_the_load("serverless", rate, size, trigger, p)
    found = estimate(name, template, region, load_for(config))
    assert found.load == Load(10, 1024, trigger)
    assert found.total_usd == pytest.approx(expected, rel=1e-9), render(found)

    outdir = synthesized_serverless.template_paths[name].parent
    shared_template = json.loads((outdir / f"{shared}.template.json").read_text())
    shared_usd = estimate(shared, shared_template, region, Load(0, 1024, 1)).total_usd
    (msk,) = _of_type(shared_template, "AWS::MSK::Cluster")
    assert msk["BrokerNodeGroupInfo"]["InstanceType"] == "kafka.t3.small"
    by_hand = msk["NumberOfBrokerNodes"] * HOURS * p("msk:kafka.t3.small")
    by_hand += msk["NumberOfBrokerNodes"] * 20 * p("msk:storage")
    by_hand += HOURS * (p("vpc:nat-gateway") + p("vpc:public-ipv4"))
    by_hand += len(_of_type(shared_template, "AWS::KMS::Key")) * p("kms:key")
    assert shared_usd == pytest.approx(by_hand, rel=1e-9)
    all_in = found.total_usd + shared_usd / 5
    assert all_in <= 150, f"${all_in:.2f}: {render(found)}"

    # ... against the same shape on EMR (the orders neighbour): the saving is real.
    emr = estimate(
        "Streaming-orders-us-east-1",
        synthesized_serverless.templates["Streaming-orders-us-east-1"],
        region,
        load_for(synthesized_serverless.config("Streaming-orders-us-east-1")),
    )
    assert emr.total_usd > 2.5 * found.total_usd
