"""infra/cost/lines.py: the lines a template's resources and the declared load
price to, and the templates it refuses to price rather than be silently low."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import pytest

from infra.cost.lines import CostLine, Load, TemplateCostError, priced_lines
from infra.cost.prices import PRICE_ROWS
from infra.cost.requests import read_counts

HOURS = 730
SECONDS = 730 * 3600


def _usd(key: str, region: str) -> float:
    (found,) = [row.usd for row in PRICE_ROWS if row.key == key and row.region == region]
    return found


def _template(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": resources}


def _total(lines: Iterable[CostLine]) -> float:
    return sum(line.monthly_usd for line in lines)


def test_a_billed_type_the_walk_does_not_price_stops_the_estimate() -> None:
    serverless = {"Type": "AWS::MSK::ServerlessCluster", "Properties": {}}
    with pytest.raises(TemplateCostError, match="ServerlessCluster"):
        priced_lines(_template(C=serverless), "us-east-1", Load(0, 1024, 10), stack="S")


def test_an_instance_count_resolved_at_deploy_time_cannot_be_priced() -> None:
    group = {"InstanceType": "m5.xlarge", "InstanceCount": {"Ref": "Count"}}
    cluster = {
        "Type": "AWS::EMR::Cluster",
        "Properties": {"Instances": {"CoreInstanceGroup": group}},
    }
    with pytest.raises(TemplateCostError, match=r"InstanceCount .*literal int"):
        priced_lines(_template(C=cluster), "us-east-1", Load(0, 1024, 10), stack="S")


def test_a_serverless_application_prices_x86_and_extra_storage_and_refuses_warm_capacity() -> None:
    def app(**props: Any) -> dict[str, Any]:
        base = {
            "Architecture": "X86_64",
            "MaximumCapacity": {"Cpu": "5 vCPU", "Memory": "10 GB", "Disk": "100 GB"},
            "RuntimeConfiguration": [
                {
                    "Classification": "spark-defaults",
                    "Properties": {"spark.executor.instances": "2"},
                }
            ],
        }
        return {"Type": "AWS::EMRServerless::Application", "Properties": {**base, **props}}

    found = priced_lines(_template(A=app()), "eu-west-1", Load(0, 1024, 10), stack="S")
    lines = {line.resource.split(" (")[0]: line for line in found}
    assert lines["EMR Serverless X86_64 vCPU"].count == 5 * HOURS
    assert lines["EMR Serverless X86_64 vCPU"].unit_usd == _usd(
        "emr-serverless:vcpu-x86", "eu-west-1"
    )
    assert lines["EMR Serverless X86_64 memory"].count == 10 * HOURS
    # 3 workers get 60 GB free; 40 GB more are billed.
    assert lines["EMR Serverless storage beyond 20 GB a worker"].count == 40 * HOURS
    with pytest.raises(TemplateCostError, match="InitialCapacity"):
        priced_lines(
            _template(A=app(InitialCapacity=[])), "us-east-1", Load(0, 1024, 10), stack="S"
        )
    with pytest.raises(TemplateCostError, match="expected 'N vCPU'"):
        bad = app(MaximumCapacity={"Cpu": {"Ref": "X"}, "Memory": "1 GB", "Disk": "20 GB"})
        priced_lines(_template(A=bad), "us-east-1", Load(0, 1024, 10), stack="S")


# A 2 vCPU / 4 GB ARM64 application with one fixed executor.
ONE_EXECUTOR_APP: Final = {
    "Type": "AWS::EMRServerless::Application",
    "Properties": {
        "Architecture": "ARM64",
        "MaximumCapacity": {"Cpu": "2 vCPU", "Memory": "4 GB", "Disk": "40 GB"},
        "RuntimeConfiguration": [
            {
                "Classification": "spark-defaults",
                "Properties": {"spark.executor.instances": "1"},
            }
        ],
    },
}


def test_enhanced_fan_out_bills_consumer_shard_hours_and_data() -> None:
    stream = {"Type": "AWS::Kinesis::Stream", "Properties": {"ShardCount": 3}}
    app = ONE_EXECUTOR_APP
    polling = priced_lines(_template(S=stream, A=app), "us-east-1", Load(10, 1024, 30), stack="S")
    efo = priced_lines(
        _template(S=stream, A=app),
        "us-east-1",
        Load(10, 1024, 30, enhanced_fan_out=True),
        stack="S",
    )
    added = {line.resource for line in efo} - {line.resource for line in polling}
    assert added == {
        "Kinesis enhanced fan-out, 1 consumer x3 shards",
        "Kinesis enhanced fan-out data (25.1 GB)",
    }
    gigabytes = 10 * SECONDS * 1024 / 1024**3
    assert _total(efo) - _total(polling) == pytest.approx(
        3 * HOURS * _usd("kinesis:efo-consumer-shard", "us-east-1")
        + gigabytes * _usd("kinesis:efo-data", "us-east-1")
    )


def test_the_request_lines_multiply_the_measured_counts_of_the_templates_target() -> None:
    """``make cost``'s S3, Glue and PutMetricData lines are the committed
    measurement (infra/cost/request_counts.json, ``python -m bench.requests``)
    times the month's batches, per target, and say so."""
    group = {"InstanceType": "m6g.xlarge", "InstanceCount": 1}
    emr = {
        "Type": "AWS::EMR::Cluster",
        "Properties": {"Instances": {"MasterInstanceGroup": group}},
    }
    serverless = ONE_EXECUTOR_APP
    measured = read_counts()
    load = Load(10, 1024, 10)
    batches = SECONDS / 10
    for target, template in (("emr", _template(C=emr)), ("serverless", _template(A=serverless))):
        lines = {
            line.resource.split(",")[0]: line
            for line in priced_lines(template, "eu-west-1", load, stack="S")
        }
        counts = measured[target]
        assert lines["S3 PUT/COPY/LIST"].count == pytest.approx(
            batches * counts.s3_put_class / 1000
        )
        assert lines["S3 GET/HEAD"].count == pytest.approx(batches * counts.s3_get_class / 1000)
        assert lines["Glue Data Catalog requests"].count == pytest.approx(
            batches * counts.glue / 1e6
        )
        assert lines["CloudWatch PutMetricData"].count == pytest.approx(
            batches * counts.put_metric_data / 1000
        )
        assert f"measured, {target} run" in lines["S3 PUT/COPY/LIST"].resource
