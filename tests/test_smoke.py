from __future__ import annotations

from typing import Any

import boto3

from local.emulators import Endpoints


def test_spark_session_uses_hive_catalog(spark: Any) -> None:
    assert spark.conf.get("spark.sql.catalogImplementation") == "hive"
    assert spark.range(5).count() == 5


def test_moto_kinesis_answers(endpoints: Endpoints) -> None:
    client = boto3.client("kinesis", endpoint_url=endpoints.aws_url, region_name="us-east-1")
    client.create_stream(StreamName="smoke", ShardCount=1)
    client.get_waiter("stream_exists").wait(StreamName="smoke")
    assert [s["ShardId"] for s in client.list_shards(StreamName="smoke")["Shards"]] == [
        "shardId-000000000000"
    ]
