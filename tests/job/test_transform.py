"""Classification, failure taxonomy, timestamps and the one-shuffle reduction."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

import pytest
from aws_kinesis_agg.aggregator import RecordAggregator  # type: ignore[import-untyped]
from pyspark.sql import functions as sf
from pyspark.testing import assertDataFrameEqual

from job.transform import classify, failures, parse_timestamp, utc_date
from model.config import DEFAULT_EVENT_FIELDS, EventField
from model.record import (
    ERROR_CLASS,
    MESSAGE,
    REASON,
    REASONS,
    UNDECLARED_FIELDS,
    UNDECLARED_KEYS,
    column_name,
)
from model.table_layout import table_columns
from tests.job.job_helpers import event, raw_frame, table_rows

MAX = 2_048


def _reasons(spark: Any, records: list[bytes], **kw: Any) -> list[str | None]:
    frame = classify(raw_frame(spark, records), max_record_bytes=MAX, **kw)
    ordered = frame.orderBy(frame["sequenceNumber"].cast("int"))
    return [r[REASON] for r in ordered.collect()]


def test_column_names_are_snake_case_for_glue() -> None:
    assert column_name("occurredAt") == "occurred_at"
    assert column_name("id") == "id"
    names = [c.name for c in table_columns(DEFAULT_EVENT_FIELDS)]
    assert names[:5] == ["id", "type", "occurred_at", "occurred_at_raw", "payload"]
    assert names[-3:] == ["batch_id", "sub_sequence_number", "undeclared_fields"]
    assert "event_date" not in names, "the day partition is hidden (Iceberg), not a column"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # 9 fractional digits and an offset: the instant, truncated to microseconds.
        ("2026-01-02T03:04:05.123456789+09:00", dt.datetime(2026, 1, 1, 18, 4, 5, 123456)),
        ("2026-01-02T03:04:05.999999999-05:30", dt.datetime(2026, 1, 2, 8, 34, 5, 999999)),
        ("2026-01-02T03:04:05.1Z", dt.datetime(2026, 1, 2, 3, 4, 5, 100000)),
        ("2026-01-02T03:04:05Z", dt.datetime(2026, 1, 2, 3, 4, 5)),
        ("2026-01-02T03:04:05.123456", dt.datetime(2026, 1, 2, 3, 4, 5, 123456)),
        # No offset (read as UTC) whatever the fraction's length: the offset is
        # told by the 6th character from the end, never a digit or ':' here.
        ("2026-01-02T03:04:05", dt.datetime(2026, 1, 2, 3, 4, 5)),
        ("2026-01-02T03:04:05.1", dt.datetime(2026, 1, 2, 3, 4, 5, 100000)),
        ("2026-01-02T03:04:05.12", dt.datetime(2026, 1, 2, 3, 4, 5, 120000)),
        ("2026-01-02T03:04:05+00:30", dt.datetime(2026, 1, 2, 2, 34, 5)),
        ("2026-01-02T03:04:05.1234567891Z", None),  # 10 digits: not ISO-8601
        ("2026-02-30T00:00:00Z", None),
        ("2026-01-02", None),
        ("yesterday at noon", None),
    ],
)
def test_parse_timestamp(spark: Any, text: str, expected: dt.datetime | None) -> None:
    row = spark.createDataFrame([(text,)], "t string").select(
        parse_timestamp(sf.col("t")).alias("ts")
    )
    # The session zone is UTC (spark_conf); naive datetimes here are UTC.
    assert row.first()["ts"] == expected


def test_event_date_is_the_utc_date_whatever_the_session_zone(spark: Any) -> None:
    frame = spark.createDataFrame([("2026-01-01T23:30:00-05:00",)], "t string")
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Asia/Seoul")
    try:
        day = frame.select(utc_date(parse_timestamp(sf.col("t"))).alias("d")).first()["d"]
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    assert day == dt.date(2026, 1, 2)


def test_failure_taxonomy_one_reason_per_record(spark: Any) -> None:
    records = [
        event("ok-1"),
        b"x" * (MAX + 1),  # too_large wins over everything
        b'{"id":"k","type":"\xff\xfe\xfd"}',  # not_utf8 wins over missing fields
        b'{"id":"k","type":"created","occurredAt":',  # truncated
        b"[1,2,3]",  # JSON, not an object
        b"null",
        b"",
        event("ok-2", payload=None),  # payload null: missing
        b'{"type":"created","occurredAt":"2026-01-02T03:04:05Z","payload":{}}',
        event("wt-1", payload=42),
        b'{"id":42,"type":"created","occurredAt":"2026-01-02T03:04:05Z","payload":{}}',
        event("wt-3", occurredAt=1735689600),  # epoch number: wrong type, not bad timestamp
        event("bt-1", occurredAt="yesterday at noon"),
        b'{"id":"dup","id":"dup2"}',  # duplicate keys: not accepted as JSON
    ]
    assert _reasons(spark, records) == [
        None,
        "too_large",
        "not_utf8",
        "malformed_json",
        "malformed_json",
        "malformed_json",
        "malformed_json",
        "missing_field",
        "missing_field",
        "wrong_type",
        "wrong_type",
        "wrong_type",
        "bad_timestamp",
        "malformed_json",
    ]


OBJECT = event("t-1")


@pytest.mark.parametrize(
    ("name", "record"),
    [
        ("concatenated objects", OBJECT + event("t-2")),
        ("concatenated, space between", OBJECT + b" " + event("t-2")),
        ("newline-separated objects", OBJECT + b"\n" + event("t-2") + b"\n"),
        ("comma-separated objects", OBJECT + b"," + event("t-2")),
        ("stray closing brace", OBJECT + b"}"),
        ("stray closing bracket", OBJECT + b"]"),
        ("stray bracket, then an object", OBJECT + b"]" + event("t-2")),
        ("stray bracket, then a brace", OBJECT + b"] }"),
        ("free text", OBJECT + b" trailing"),
        ("free text after a newline", OBJECT + b"\nsent by producer v2"),
        ("a number", OBJECT + b" 1"),
        ("a second BOM after the value", OBJECT + "\ufeff".encode()),
        ("no-break space (not JSON whitespace)", OBJECT + "\u00a0".encode()),
        ("NUL", OBJECT + b"\x00"),
        ("the wrapper's own sentinel", OBJECT + b',"\\u0001"'),
    ],
)
def test_text_after_the_json_value_is_trailing_data(spark: Any, name: str, record: bytes) -> None:
    frame = classify(raw_frame(spark, [record]), max_record_bytes=MAX)
    row = frame.first()
    assert row is not None
    assert (row[REASON], row[ERROR_CLASS]) == ("trailing_data", "TrailingDataError"), name
    assert "only whitespace may follow" in row[MESSAGE]


def test_whitespace_around_the_value_is_not_trailing_data(spark: Any) -> None:
    records = [
        OBJECT + b"\n",
        OBJECT + b" \t\r\n  ",
        b"\r\n\t " + event("t-3") + b"\n",  # leading JSON whitespace: still an object
        event("t-4", payload={"s": "}{ ] [ x"}),  # brackets inside a string
        event("t-5", payload={"k": [[1], {"a": []}]}),
    ]
    assert _reasons(spark, records) == [None] * len(records)


def test_trailing_data_is_told_from_malformed_json(spark: Any) -> None:
    records = [
        OBJECT + b"x",  # a whole object, then text: trailing
        b'{"id":"t-1",x}',  # broken inside the object: malformed
        b"x" + OBJECT,  # text first: not JSON
        b"[1] x",  # a whole array, then text: trailing (before "not an object")
        b"",
    ]
    assert _reasons(spark, records) == [
        "trailing_data",
        "malformed_json",
        "malformed_json",
        "trailing_data",
        "malformed_json",
    ]


def test_a_leading_utf8_bom_is_ignored_anywhere_else_it_fails(spark: Any) -> None:
    """RFC 8259 section 8.1: a parser may ignore a leading byte order mark."""
    bom = "\ufeff".encode()
    records = [bom + event("bom-1"), bom + bom + event("bom-2"), bom, bom + b"[1]"]
    frame = classify(raw_frame(spark, records), max_record_bytes=MAX)
    rows = frame.orderBy(frame["sequenceNumber"].cast("int")).collect()
    assert [r[REASON] for r in rows] == [None, "malformed_json", "malformed_json", "malformed_json"]
    assert rows[0]["id"] == "bom-1"


def _aggregate(records: list[tuple[str, bytes]]) -> bytes:
    aggregator = RecordAggregator()
    for key, data in records:
        aggregator.add_user_record(key, data)
    return bytes(aggregator.clear_and_get().get_contents()[2])


def test_a_record_still_in_kpl_format_is_a_bad_aggregate(spark: Any) -> None:
    """The source de-aggregates every readable aggregate; what reaches the
    classification with the magic is a corrupt one, one failure record each."""
    good = _aggregate([("a", event("agg-1")), ("b", event("agg-2"))])
    flipped = good[:-1] + bytes([good[-1] ^ 1])  # MD5 no longer matches
    body = b"\x1a\x05\x08\x00\x1a"  # a Record cut short

    truncated = good[:4] + body + hashlib.md5(body).digest()
    records = [flipped, truncated, good[:10], good[:4] + b"x" * (MAX - 4) + b"x"]
    frame = classify(raw_frame(spark, records), max_record_bytes=MAX)
    rows = frame.orderBy(frame["sequenceNumber"].cast("int")).collect()
    assert [r[REASON] for r in rows] == [
        "bad_aggregate",
        "bad_aggregate",
        "bad_aggregate",
        "too_large",
    ]
    assert "MD5 does not match" in rows[0][MESSAGE]
    assert "MD5 matches" in rows[1][MESSAGE]
    assert "too short" in rows[2][MESSAGE]
    assert rows[0][ERROR_CLASS] == "AggregateDecodeError"


def test_failure_records_keep_bytes_coordinates_reason_message_and_class(spark: Any) -> None:
    bad = b'{"id":"k","type":"\xff"}'
    frame = classify(raw_frame(spark, [event("ok"), bad]), max_record_bytes=MAX)
    out = failures(frame).collect()
    assert len(out) == 1
    row = out[0].asDict()
    assert row["data"] == bytearray(bad)
    assert (row["streamName"], row["shardId"], row["sequenceNumber"]) == (
        "stream-a",
        "shardId-000000000000",
        "2",
    )
    assert row[REASON] == "not_utf8"
    assert row[ERROR_CLASS] == "UnicodeDecodeError"
    assert "UTF-8" in row[MESSAGE]


def test_nothing_is_dropped_every_record_is_valid_or_a_failure(spark: Any) -> None:
    records = [event(f"e{i}") for i in range(5)] + [b"bad", b"[]", event("x", payload=1)]
    frame = classify(raw_frame(spark, records), max_record_bytes=MAX).cache()
    try:
        valid = table_rows(frame, fields=DEFAULT_EVENT_FIELDS, batch_id=0)
        assert valid.count() + failures(frame).count() == len(records)
        assert valid.count() == 5
    finally:
        frame.unpersist()


def test_valid_row_values_raw_string_kept_and_payload_as_json(spark: Any) -> None:
    records = [event("a", "2026-01-02T03:04:05.123456789+09:00", payload={"k": [1, 2]})]
    frame = classify(raw_frame(spark, records), max_record_bytes=MAX)
    valid = table_rows(frame, fields=DEFAULT_EVENT_FIELDS, batch_id=7)
    expected = spark.createDataFrame(
        [
            (
                "a",
                "created",
                dt.datetime(2026, 1, 1, 18, 4, 5, 123456),
                "2026-01-02T03:04:05.123456789+09:00",
                '{"k":[1,2]}',
                7,
            )
        ],
        "id string, type string, occurred_at timestamp, occurred_at_raw string, "
        "payload string, batch_id bigint",
    )
    assert valid.columns == [c.name for c in table_columns(DEFAULT_EVENT_FIELDS)]
    assertDataFrameEqual(valid.select(*expected.columns), expected)


def test_undeclared_keys_are_kept_as_compact_json_and_named(spark: Any) -> None:
    records = [
        event("a", channel="web", Type={"x": [1, None]}),  # keys compare exactly
        event("b"),
        event("c", channel=None),
        b'{"id":"d","occurredAt":"nope","channel":"app"}',  # a failure keeps its bytes
        b"[1]",
    ]
    frame = classify(raw_frame(spark, records), max_record_bytes=MAX)
    got = {
        r["sequenceNumber"]: (r[UNDECLARED_FIELDS], r[UNDECLARED_KEYS], r[REASON])
        for r in frame.collect()
    }
    assert got == {
        "1": ('{"Type":{"x":[1,null]},"channel":"web"}', ["Type", "channel"], None),
        "2": (None, None, None),
        "3": ('{"channel":null}', ["channel"], None),
        "4": ('{"channel":"app"}', ["channel"], "missing_field"),
        "5": (None, None, "malformed_json"),
    }
    valid = table_rows(frame, fields=DEFAULT_EVENT_FIELDS, batch_id=1)
    assert UNDECLARED_KEYS not in valid.columns
    kept = {r["id"]: r[UNDECLARED_FIELDS] for r in valid.collect()}
    web = '{"Type":{"x":[1,null]},"channel":"web"}'
    assert kept == {"a": web, "b": None, "c": '{"channel":null}'}


def test_a_declared_field_is_no_longer_undeclared(spark: Any) -> None:
    fields = (*DEFAULT_EVENT_FIELDS, EventField("channel", required=False))
    frame = classify(raw_frame(spark, [event("a", channel="web")]), max_record_bytes=MAX,
                     fields=fields)  # fmt: skip
    row = frame.collect()[0]
    assert (row["channel"], row[UNDECLARED_FIELDS], row[UNDECLARED_KEYS]) == ("web", None, None)


def test_int_and_float_fields_take_numbers_that_fit(spark: Any) -> None:
    """``int`` (32 bits) and ``float`` exist so a schema can widen them later
    (Iceberg promotes int -> long and float -> double in place)."""
    fields = (EventField("id"), EventField("n", "int"), EventField("x", "float"))
    records = [
        b'{"id":"a","n":2147483647,"x":1.5}',
        b'{"id":"b","n":2147483648,"x":1}',
        b'{"id":"c","n":1.5,"x":2}',
        b'{"id":"d","n":1,"x":"2"}',
    ]
    assert _reasons(spark, records, fields=fields) == [None, "wrong_type", "wrong_type",
                                                       "wrong_type"]  # fmt: skip
    frame = classify(raw_frame(spark, records[:1]), max_record_bytes=MAX, fields=fields)
    assert dict(frame.dtypes)["n"] == "int" and dict(frame.dtypes)["x"] == "float"
    assert [tuple(r) for r in frame.select("n", "x").collect()] == [(2147483647, 1.5)]


def test_configurable_schema_types_and_optional_fields(spark: Any) -> None:
    fields = (
        EventField("id", "string"),
        EventField("at", "timestamp"),
        EventField("n", "long"),
        EventField("ok", "boolean", required=False),
        EventField("tags", "array", required=False),
    )
    records = [
        b'{"id":"a","at":"2026-01-02T03:04:05Z","n":5,"ok":true,"tags":["x"]}',
        b'{"id":"b","at":"2026-01-02T03:04:05Z","n":5}',
        b'{"id":"c","at":"2026-01-02T03:04:05Z","n":5.5}',
        b'{"id":"d","at":"2026-01-02T03:04:05Z","n":"5"}',
        b'{"id":"e","at":"2026-01-02T03:04:05Z","n":5,"ok":"yes"}',
    ]
    assert _reasons(spark, records, fields=fields) == [
        None,
        None,
        "wrong_type",
        "wrong_type",
        "wrong_type",
    ]
    frame = classify(raw_frame(spark, records[:2]), max_record_bytes=MAX, fields=fields)
    got = frame.select("id", "n", "ok", "tags").orderBy("id").collect()
    assert [tuple(r) for r in got] == [("a", 5, True, '["x"]'), ("b", 5, None, None)]


def test_every_json_type_is_told_apart(spark: Any) -> None:
    """The type check reads a type tag per field (``schema_of_variant``), not
    the value's JSON text: each schema type against each JSON type."""
    fields = (
        EventField("id", "string"),
        EventField("x", "double", required=False),
        EventField("n", "long", required=False),
        EventField("ok", "boolean", required=False),
        EventField("tags", "array", required=False),
        EventField("obj", "object", required=False),
    )
    cases = {
        '"x":5': None,
        '"x":-5.25': None,
        '"x":1e3': None,
        '"x":"5"': "wrong_type",
        '"x":true': "wrong_type",
        '"n":-128': None,
        '"n":9223372036854775807': None,
        '"n":9223372036854775808': "wrong_type",  # past a long: DECIMAL
        '"n":1e3': "wrong_type",
        '"ok":false': None,
        '"ok":0': "wrong_type",
        '"ok":"true"': "wrong_type",
        '"tags":[]': None,
        '"tags":{"a":1}': "wrong_type",
        '"tags":"[1]"': "wrong_type",
        '"obj":{}': None,
        '"obj":[{}]': "wrong_type",
        '"obj":"{}"': "wrong_type",
        '"id":5': "wrong_type",
        '"id":["a"]': "wrong_type",
        '"obj":null': None,  # optional and null: absent
    }
    records = [
        ("{" + (body if body.startswith('"id"') else f'"id":"r{i}",{body}') + "}").encode()
        for i, body in enumerate(cases)
    ]
    assert dict(zip(cases, _reasons(spark, records, fields=fields), strict=True)) == cases
    frame = classify(raw_frame(spark, records[:3]), max_record_bytes=MAX, fields=fields)
    assert sorted(r[0] for r in frame.select("x").collect()) == [-5.25, 5.0, 1000.0]


def test_every_reason_has_an_error_class_in_precedence_order() -> None:
    """REASONS are ERROR_CLASSES' keys: a reason without an error class would be
    missing here. The names are the failure topic's ``reason`` header values."""
    assert REASONS == (
        "too_large",
        "bad_aggregate",
        "not_utf8",
        "malformed_json",
        "trailing_data",
        "missing_field",
        "wrong_type",
        "bad_timestamp",
    )
