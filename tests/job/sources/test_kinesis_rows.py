"""GetRecords records as Arrow batches of the source schema (job.sources.kinesis_rows):
plain records column by column, KPL aggregates expanded where they stand, a
corrupt aggregate kept whole."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from job.sources.kinesis_rows import ARROW_SCHEMA, records_to_batch
from model import record
from producer.aggregation import aggregate, corrupt

SEOUL = timezone(timedelta(hours=9))
AT = datetime(2026, 1, 2, 12, 0, 0, 250_000, tzinfo=SEOUL)


def _record(data: bytes, sequence: str, key: str = "pk") -> dict[str, Any]:
    return {
        "Data": data,
        "PartitionKey": key,
        "SequenceNumber": sequence,
        "ApproximateArrivalTimestamp": AT,
    }


def test_plain_records_keep_their_order_coordinates_and_instant() -> None:
    batch = records_to_batch("s", "shardId-1", [_record(b"a", "10"), _record(b"b", "11", "k2")])
    assert batch.schema == ARROW_SCHEMA
    assert batch.schema.names == list(record.SOURCE_COLUMNS)
    rows = batch.to_pylist()
    assert [r[record.DATA] for r in rows] == [b"a", b"b"]
    assert [r[record.SEQUENCE.source] for r in rows] == ["10", "11"]
    assert [r[record.PARTITION_KEY.source] for r in rows] == ["pk", "k2"]
    assert {r[record.STREAM.source] for r in rows} == {"s"}
    assert {r[record.SHARD.source] for r in rows} == {"shardId-1"}
    assert [r[record.SUB_SEQUENCE.source] for r in rows] == [None, None]
    # The same instant, in UTC, whatever zone botocore's datetime had.
    assert rows[0][record.ARRIVAL.source] == AT.astimezone(UTC)


@pytest.mark.parametrize("aggregated", [False, True])
def test_the_instant_survives_pyarrow_ignore_timezone(
    monkeypatch: pytest.MonkeyPatch, aggregated: bool
) -> None:
    # Importing pyspark.pandas sets it; Arrow then keeps the wall clock (12:00)
    # and labels it UTC, nine hours late.
    monkeypatch.setenv("PYARROW_IGNORE_TIMEZONE", "1")
    first = aggregate("outer", [b'{"id":"u0"}']) if aggregated else b"a"
    rows = records_to_batch("s", "shardId-1", [_record(first, "1"), _record(b"b", "2")])
    arrivals = [r[record.ARRIVAL.source] for r in rows.to_pylist()]
    assert arrivals == [AT.astimezone(UTC)] * 2
    assert arrivals[0].hour == 3


def test_an_aggregate_becomes_its_user_records_where_it_stands() -> None:
    packed = aggregate("outer", [b'{"id":"u0"}', b'{"id":"u1"}', b'{"id":"u2"}'])
    records = [_record(b"before", "1"), _record(packed, "2", "outer"), _record(b"after", "3")]
    rows = records_to_batch("s", "shardId-0", records).to_pylist()
    assert [r[record.DATA] for r in rows] == [
        b"before",
        b'{"id":"u0"}',
        b'{"id":"u1"}',
        b'{"id":"u2"}',
        b"after",
    ]
    assert [r[record.SEQUENCE.source] for r in rows] == ["1", "2", "2", "2", "3"]
    assert [r[record.SUB_SEQUENCE.source] for r in rows] == [None, 0, 1, 2, None]
    assert [r[record.PARTITION_KEY.source] for r in rows][1:4] == ["outer"] * 3


def test_a_corrupt_aggregate_stays_one_row_with_its_bytes() -> None:
    bad = corrupt(aggregate("outer", [b'{"id":"u0"}', b'{"id":"u1"}']))
    rows = records_to_batch("s", "shardId-0", [_record(bad, "7"), _record(b"x", "8")]).to_pylist()
    assert [r[record.DATA] for r in rows] == [bad, b"x"]
    assert [r[record.SUB_SEQUENCE.source] for r in rows] == [None, None]
    assert [r[record.SEQUENCE.source] for r in rows] == ["7", "8"]
