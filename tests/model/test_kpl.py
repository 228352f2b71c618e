"""The KPL parser against aggregates made by awslabs' own aggregator (aws-kinesis-agg)."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator  # type: ignore[import-untyped]
from aws_kinesis_agg.deaggregator import (  # type: ignore[import-untyped]
    iter_deaggregate_records,
)

from model.kpl import MAGIC, AggregateError, UserRecord, deaggregate, is_aggregate


def aggregate(records: Sequence[tuple[str, bytes, str | None]]) -> bytes:
    aggregator = RecordAggregator()
    for key, data, explicit in records:
        aggregator.add_user_record(key, data, explicit)
    return bytes(aggregator.clear_and_get().get_contents()[2])


def reference(data: bytes) -> list[tuple[bytes, str, str | None, int]]:
    """What awslabs' deaggregator makes of ``data`` (boto3 record shape)."""
    record = {
        "Data": data,
        "PartitionKey": "outer",
        "SequenceNumber": "1",
        "ApproximateArrivalTimestamp": 0,
    }
    return [
        (base64.b64decode(r["kinesis"]["data"]), r["kinesis"]["partitionKey"],
         r["kinesis"].get("explicitHashKey"), r["kinesis"].get("subSequenceNumber"))
        for r in iter_deaggregate_records([record], data_format="Boto3")
    ]  # fmt: skip


def test_one_user_record() -> None:
    data = aggregate([("pk", b'{"id":"a"}', None)])
    assert is_aggregate(data)
    assert deaggregate(data) == [UserRecord(b'{"id":"a"}', "pk", None, 0)]


def test_many_user_records_keep_order_keys_and_sub_sequence_numbers() -> None:
    records = [
        (f"key-{i % 3}", f'{{"id":"{i}"}}'.encode(), str(i * 10**30) if i % 4 == 0 else None)
        for i in range(50)
    ]
    data = aggregate(records)
    got = deaggregate(data)
    assert [(r.partition_key, r.data, r.explicit_hash_key) for r in got] == records
    assert [r.sub_sequence_number for r in got] == list(range(50))
    # The same reading as awslabs' Python deaggregator, except the explicit hash
    # key of a record that has none: it reads index 0 of the table (it does not
    # check HasField), KCL and the JVM connector (hasExplicitHashKeyIndex) and
    # this parser say none.
    theirs = reference(data)
    ours = [(r.data, r.partition_key, r.sub_sequence_number) for r in got]
    assert ours == [(d, k, n) for d, k, _, n in theirs]
    assert [r.explicit_hash_key for r in got if r.explicit_hash_key] == [
        e for (_, _, given), (_, _, e, _) in zip(records, theirs, strict=True) if given
    ]


def test_binary_and_empty_payloads_and_unicode_keys() -> None:
    records = [("ключ", b"\x00\xff" * 300, None), ("k", b"", None), ("ключ", b"x", None)]
    assert [(r.data, r.partition_key) for r in deaggregate(aggregate(records))] == [
        (b"\x00\xff" * 300, "ключ"),
        (b"", "k"),
        (b"x", "ключ"),
    ]


def test_a_plain_record_is_not_an_aggregate() -> None:
    assert not is_aggregate(b'{"id":"a"}')
    assert not is_aggregate(MAGIC[:3])
    with pytest.raises(AggregateError, match="no KPL magic"):
        deaggregate(b'{"id":"a"}')


def _with_digest(message: bytes) -> bytes:
    return MAGIC + message + hashlib.md5(message).digest()


@pytest.mark.parametrize(
    ("name", "mutate", "error"),
    [
        ("MD5 flipped", lambda d: d[:-1] + bytes([d[-1] ^ 1]), "MD5"),
        ("payload byte flipped", lambda d: d[:8] + bytes([d[8] ^ 1]) + d[9:], "MD5"),
        ("cut short", lambda d: d[:-20], "MD5"),
        ("only magic and digest", lambda d: d[:4] + d[-16:], "too short"),
        ("protobuf cut inside a field", lambda d: _with_digest(d[4:-16][:-3]), "protobuf ends"),
        ("no records", lambda d: _with_digest(b"\x0a\x02pk"), "no user records"),
        ("key index past the table", lambda d: _with_digest(b"\x0a\x01k\x1a\x04\x08\x05\x1a\x00"),
         "partition key index 5"),
        ("record without data", lambda d: _with_digest(b"\x0a\x01k\x1a\x02\x08\x00"),
         "required field"),
        ("wire type of a group", lambda d: _with_digest(b"\x0b"), "wire type 3"),
    ],
)  # fmt: skip
def test_a_corrupt_aggregate_raises(name: str, mutate: object, error: str) -> None:
    data = aggregate([("a", b'{"id":"a"}', None), ("b", b'{"id":"b"}', None)])
    assert callable(mutate)
    bad = mutate(data)
    with pytest.raises(AggregateError, match=error):
        deaggregate(bad)


def test_unknown_fields_and_tags_are_skipped() -> None:
    # Record with a tag (field 4) and an unknown varint field 9; message with an unknown field 7.
    record = b"\x08\x00\x1a\x01x" + b"\x22\x05\x0a\x03tag" + b"\x48\x01"
    message = b"\x0a\x01k" + b"\x3a\x01z" + b"\x1a" + bytes([len(record)]) + record
    assert deaggregate(_with_digest(message)) == [UserRecord(b"x", "k", None, 0)]
