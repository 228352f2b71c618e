"""local.event_stream: messages botocore's own decoder parses, and checks."""

from __future__ import annotations

import pytest
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer

from local.event_stream import child_shards, encode_message, event_message, shard_event


def test_messages_decode_with_botocores_event_stream_buffer() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(event_message("initial-response", {}))
    buffer.add_data(encode_message({":message-type": "event", ":event-type": "x"}, b'{"a": 1}'))
    first, second = list(buffer)
    assert first.headers[":event-type"] == "initial-response"
    assert first.payload == b"{}"
    assert second.headers == {":message-type": "event", ":event-type": "x"}
    assert second.payload == b'{"a": 1}'


def test_a_corrupted_message_fails_botocores_checksum() -> None:
    message = bytearray(event_message("initial-response", {"k": "v"}))
    message[-6] ^= 0xFF  # a payload byte
    buffer = EventStreamBuffer()
    buffer.add_data(bytes(message))
    with pytest.raises(ChecksumMismatch):
        list(buffer)


def test_a_shard_event_carries_its_records_in_the_json_protocol_s_form() -> None:
    record = {
        "SequenceNumber": 7,
        "ApproximateArrivalTimestamp": 1_700_000_000.5,
        "Data": b"hi",
        "PartitionKey": "k",
    }

    body = shard_event([record], "8", 0, child_shards=[])

    assert body == {
        "Records": [
            {
                "SequenceNumber": "7",
                "ApproximateArrivalTimestamp": 1_700_000_000.5,
                "Data": "aGk=",
                "PartitionKey": "k",
            }
        ],
        "ContinuationSequenceNumber": "8",
        "MillisBehindLatest": 0,
        "ChildShards": [],
    }


def test_child_shards_name_both_parents_of_a_merge() -> None:
    listed = [
        {"ShardId": "a", "HashKeyRange": {"StartingHashKey": "0"}},
        {"ShardId": "b", "ParentShardId": "a", "HashKeyRange": {"StartingHashKey": "0"}},
        {
            "ShardId": "c",
            "ParentShardId": "x",
            "AdjacentParentShardId": "a",
            "HashKeyRange": {"StartingHashKey": "5"},
        },
    ]

    found = child_shards(listed, "a")

    assert [c["ShardId"] for c in found] == ["b", "c"]
    assert found[1]["ParentShards"] == ["x", "a"]
