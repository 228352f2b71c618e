"""``job.sources.aws_kinesis``: the options the job hands the Kinesis connector."""

from __future__ import annotations

from job.sources.aws_kinesis import connector_options
from model.config import JobConfig
from tests.job.source_helpers import job_config


def test_connector_options_names_and_value_formats() -> None:
    config = job_config("orders", "http://127.0.0.1:4566", "/tmp/cp")
    assert connector_options(config) == {
        "kinesis.streamName": "orders",
        "kinesis.region": "us-east-1",
        "kinesis.kinesisRegion": "us-east-1",
        "kinesis.endpointUrl": "http://127.0.0.1:4566",
        "kinesis.startingPosition": "TRIM_HORIZON",
        "kinesis.describeShardInterval": "30s",
        "kinesis.maxFetchRecordsPerShard": "10000",
        "kinesis.maxFetchTimePerShardSec": "10",
        "kinesis.failOnDataLoss": "true",
        "kinesis.consumerType": "GetRecords",
    }


def test_connector_options_fill_public_endpoint_and_efo_consumer() -> None:
    efo = job_config("orders", "x", "/tmp/cp", consumer_type="SubscribeToShard", consumer_name="c1")
    config = JobConfig.from_dict(
        {**efo.to_dict(), "kinesis_endpoint_url": None, "region": "cn-north-1"}
    )
    options = connector_options(config)
    assert options["kinesis.endpointUrl"] == "https://kinesis.cn-north-1.amazonaws.com.cn"
    assert options["kinesis.consumerType"] == "SubscribeToShard"
    assert options["kinesis.consumerName"] == "c1"
