"""bench/kinesis_http.py, the loopback stand-in for Kinesis' read API: it
pages each shard's records in sequence order, serves only the visible ones
until told more are, says how far behind a page is, refuses any other
operation, and answers botocore's JSON 1.1 requests over HTTP."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config

from bench.kinesis_http import Layout, _handler, _Server, _State, raw_rate, set_visible

LAYOUT = Layout(shards=2, records_per_shard=5, record_bytes=100)


def _json(body: bytes) -> dict[str, Any]:
    answer: dict[str, Any] = json.loads(body)
    return answer


def _page(state: _State, iterator: str, limit: int = 10) -> dict[str, Any]:
    return _json(state.answer("GetRecords", {"ShardIterator": iterator, "Limit": limit}))


def test_shards_are_listed_and_iterators_start_where_asked() -> None:
    state = _State(LAYOUT)
    shards = _json(state.answer("ListShards", {}))["Shards"]
    assert [s["ShardId"] for s in shards] == ["shardId-000000000000", "shardId-000000000001"]
    first = state.sequence(1, 0)
    asks = {
        "TRIM_HORIZON": {},
        "LATEST": {},
        "AFTER_SEQUENCE_NUMBER": {"StartingSequenceNumber": first},
    }
    iterators = {
        kind: _json(
            state.answer(
                "GetShardIterator",
                {"ShardId": "shardId-000000000001", "ShardIteratorType": kind, **extra},
            )
        )["ShardIterator"]
        for kind, extra in asks.items()
    }
    assert iterators == {
        "TRIM_HORIZON": "shardId-000000000001|0",
        "LATEST": "shardId-000000000001|5",
        "AFTER_SEQUENCE_NUMBER": "shardId-000000000001|1",
    }


def test_pages_follow_the_visible_end_and_say_how_far_behind_they_are() -> None:
    state = _State(LAYOUT)
    state.visible = 3
    page = _page(state, "shardId-000000000000|0", limit=2)
    sequences = [state.position(0, r["SequenceNumber"]) for r in page["Records"]]
    assert sequences == [0, 1]
    assert (page["NextShardIterator"], page["MillisBehindLatest"]) == (
        "shardId-000000000000|2",
        1000,
    )
    last = _page(state, page["NextShardIterator"])
    assert len(last["Records"]) == 1 and last["MillisBehindLatest"] == 0
    assert _page(state, last["NextShardIterator"])["Records"] == []
    record = json.loads(base64.b64decode(last["Records"][0]["Data"]))
    assert record["id"] == "payload-2"


def test_an_unknown_operation_is_refused() -> None:
    with pytest.raises(KeyError):
        _State(LAYOUT).answer("PutRecord", {})


@pytest.fixture
def endpoint() -> Iterator[str]:
    state = _State(LAYOUT)
    state.visible = 0
    server = _Server(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_botocore_reads_what_is_made_visible_over_http(endpoint: str) -> None:
    client = boto3.client(
        "kinesis",
        endpoint_url=endpoint,
        region_name="eu-west-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}),
    )
    iterator = client.get_shard_iterator(
        StreamName="bench", ShardId="shardId-000000000000", ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    assert client.get_records(ShardIterator=iterator)["Records"] == []
    set_visible(endpoint, 4)
    assert len(client.get_records(ShardIterator=iterator)["Records"]) == 4
    assert raw_rate(endpoint, LAYOUT, threads=2) > 0
