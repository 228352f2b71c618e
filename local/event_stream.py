"""The AWS event-stream encoding of a ``SubscribeToShard`` answer, as
:mod:`local.efo_endpoint` serves it.

Each message is in the encoding botocore's ``EventStreamBuffer`` parses
(https://botocore.amazonaws.com/v1/documentation/api/latest/reference/eventstream.html):
a prelude (total length, headers length, CRC32 of the two), the headers
(``:message-type``, ``:event-type`` or ``:exception-type``, ``:content-type``,
as 7 = string values), a JSON payload and the CRC32 of all before it. The
events' bodies are those of ``SubscribeToShardEvent``
(https://docs.aws.amazon.com/kinesis/latest/APIReference/API_SubscribeToShardEvent.html).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

EVENT_STREAM_TYPE: Final = "application/vnd.amazon.eventstream"
_STRING: Final = 7  # the event-stream header value type of a UTF-8 string


def encode_message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude, prelude CRC, headers, payload, CRC."""
    encoded = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
        encoded += struct.pack(">B", len(raw_name)) + raw_name
        encoded += struct.pack(">BH", _STRING, len(raw_value)) + raw_value
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    head = prelude + struct.pack(">I", binascii.crc32(prelude)) + encoded + payload
    return head + struct.pack(">I", binascii.crc32(head))


def event_message(event_type: str, body: Mapping[str, Any]) -> bytes:
    return encode_message(
        {
            ":message-type": "event",
            ":event-type": event_type,
            ":content-type": "application/json",
        },
        json.dumps(body).encode("utf-8"),
    )


def exception_message(exception_type: str, message: str) -> bytes:
    return encode_message(
        {
            ":message-type": "exception",
            ":exception-type": exception_type,
            ":content-type": "application/json",
        },
        json.dumps({"message": message}).encode("utf-8"),
    )


def record_json(record: Mapping[str, Any]) -> dict[str, Any]:
    """A GetRecords record (as boto3 parsed it) in the JSON protocol's form."""
    arrival = record["ApproximateArrivalTimestamp"]
    out: dict[str, Any] = {
        "SequenceNumber": str(record["SequenceNumber"]),
        "ApproximateArrivalTimestamp": (
            arrival.timestamp() if isinstance(arrival, datetime) else float(arrival)
        ),
        "Data": base64.b64encode(bytes(record["Data"])).decode("ascii"),
        "PartitionKey": str(record["PartitionKey"]),
    }
    if record.get("EncryptionType"):
        out["EncryptionType"] = record["EncryptionType"]
    return out


def shard_event(
    records: Sequence[Mapping[str, Any]],
    continuation: str | None,
    millis_behind: int,
    child_shards: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "Records": [record_json(r) for r in records],
        "ContinuationSequenceNumber": continuation,
        "MillisBehindLatest": millis_behind,
    }
    if child_shards is not None:
        body["ChildShards"] = list(child_shards)
    return body


def child_shards(shards: Sequence[Mapping[str, Any]], parent: str) -> list[dict[str, Any]]:
    """The ``ChildShards`` of ``parent`` from a ListShards answer."""
    found = []
    for shard in shards:
        parents = [shard.get("ParentShardId"), shard.get("AdjacentParentShardId")]
        if parent in parents:
            found.append(
                {
                    "ShardId": shard["ShardId"],
                    "ParentShards": [p for p in parents if p],
                    "HashKeyRange": shard["HashKeyRange"],
                }
            )
    return found
