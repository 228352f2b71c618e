"""bench/kinesis_http.py: the loopback stand-in the reader benchmark drains
answers botocore's Kinesis calls with the records it holds, only the visible
ones until a benchmark releases the backlog, and refuses what it does not
serve."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from bench.kinesis_http import TARGET_PREFIX, Layout, raw_rate, serve_in_process, set_visible

LAYOUT = Layout(shards=2, records_per_shard=30, record_bytes=200)
VISIBLE = 10


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with serve_in_process(LAYOUT, VISIBLE) as url:
        yield url


def _client(endpoint: str) -> Any:
    return boto3.client("kinesis", region_name="us-east-1", endpoint_url=endpoint)


def _iterator(client: Any, shard: str, kind: str, **extra: str) -> str:
    answer = client.get_shard_iterator(
        StreamName="any", ShardId=shard, ShardIteratorType=kind, **extra
    )
    return str(answer["ShardIterator"])


def test_pages_stop_at_the_visible_end_until_the_backlog_is_released(endpoint: str) -> None:
    client = _client(endpoint)
    shards = [s["ShardId"] for s in client.list_shards(StreamName="any")["Shards"]]
    assert shards == [LAYOUT.shard_id(0), LAYOUT.shard_id(1)]
    set_visible(endpoint, VISIBLE)

    first = client.get_records(ShardIterator=_iterator(client, shards[1], "TRIM_HORIZON"), Limit=4)
    rest = client.get_records(ShardIterator=first["NextShardIterator"], Limit=100)
    idle = client.get_records(ShardIterator=rest["NextShardIterator"])
    set_visible(endpoint, LAYOUT.records_per_shard)
    released = client.get_records(ShardIterator=idle["NextShardIterator"])

    assert len(first["Records"]) == 4 and first["MillisBehindLatest"] == 1000
    assert len(rest["Records"]) == VISIBLE - 4 and rest["MillisBehindLatest"] == 0
    assert idle["Records"] == []
    assert len(released["Records"]) == LAYOUT.records_per_shard - VISIBLE
    body = json.loads(first["Records"][0]["Data"])
    assert body["id"].startswith("payload-") and len(first["Records"][0]["Data"]) >= 150
    sequences = [int(r["SequenceNumber"]) for r in [*first["Records"], *rest["Records"]]]
    assert sequences == sorted(sequences) and len(set(sequences)) == VISIBLE


def test_an_iterator_after_a_record_starts_at_the_next_one_and_latest_at_the_visible_end(
    endpoint: str,
) -> None:
    client = _client(endpoint)
    shard = LAYOUT.shard_id(0)
    set_visible(endpoint, VISIBLE)
    records = client.get_records(ShardIterator=_iterator(client, shard, "TRIM_HORIZON"))["Records"]

    after = _iterator(
        client,
        shard,
        "AFTER_SEQUENCE_NUMBER",
        StartingSequenceNumber=records[2]["SequenceNumber"],
    )
    latest = client.get_records(ShardIterator=_iterator(client, shard, "LATEST"))

    following = client.get_records(ShardIterator=after, Limit=1)["Records"]
    assert following[0]["SequenceNumber"] == records[3]["SequenceNumber"]
    assert latest["Records"] == [] and latest["MillisBehindLatest"] == 0


def test_an_operation_it_does_not_serve_is_refused(endpoint: str) -> None:
    host, port = endpoint.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request(
            "POST", "/", body=b"{}", headers={"X-Amz-Target": TARGET_PREFIX + "PutRecord"}
        )
        reply = connection.getresponse()
        answer = json.loads(reply.read())
    finally:
        connection.close()
    assert reply.status == 400 and answer["__type"] == "UnknownOperationException"


def test_raw_rate_pages_through_every_record_it_holds(endpoint: str) -> None:
    set_visible(endpoint, LAYOUT.records_per_shard)
    assert raw_rate(endpoint, LAYOUT, threads=2) > 0
