"""The undeclared-key step of :func:`job.undeclared.with_undeclared` never misses
a key and keeps what was sent: only rows whose object has more members than
the declared keys they hold call the JVM function that finds them, so every
spelling that could confuse a count or a key comparison is here (escaped and
non-ASCII keys, a declared name spelled with an escape, case, JSON ``null``
values, whitespace, a byte order mark, the empty key), and the kept values
(doubles, nested objects, arrays) are checked against Python's own reading of
the JSON."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from job.key_series import UndeclaredKeySeries
from job.transform import classify
from model import contract
from model.config import DEFAULT_EVENT_FIELDS, EventField
from model.record import REASON, UNDECLARED_FIELDS, UNDECLARED_KEYS
from tests.job.job_helpers import raw_frame

MAX = 2_048
TS = '"occurredAt":"2026-01-02T03:04:05Z"'
NUMBERS = (
    EventField("id"),
    EventField("n", "long", required=False),
    EventField("x", "double", required=False),
    EventField("ok", "boolean", required=False),
    EventField("tags", "array", required=False),
)

DEFAULT_RECORDS = [
    '{"id":"a","type":"t",' + TS + ',"payload":{"n":1}}',
    '{"id":"a","type":"t",' + TS + ',"payload":{"n":1},"":0}',
    '{"":0,"id":"a","type":"t",' + TS + ',"payload":{}}',
    '{"id":"a","type":"t",' + TS + ',"payload":{"v":1e3},"c":1}',  # 1e3 prints 1000.0
    '{"id":"a","type":"t",' + TS + ',"payload":{"v":1E400},"c":1}',  # prints "Infinity"
    '{"id":"a","type":"t",' + TS + ',"payload":{"v":-1e-7,"w":[5e-324]},"c":1}',
    '{"id":"a","type":"t",' + TS + ',"payload":{"v":1.50,"s":"\\u00e9"}}',
    '{"id":"\\u00e9","type":"t",' + TS + ',"payload":{},"é":true}',
    '{"\\u0069d":"a","type":"t",' + TS + ',"payload":{}}',  # "id", spelled long
    '{"Id":"a","type":"t",' + TS + ',"payload":{}}',
    '{"id":"a","type":7,' + TS + ',"payload":"p","q":null}',  # wrong types
    '{"id":"a","type":"t",' + TS + ',"payload":null,"q":[]}',
    ' { "id" : "a" , "type":"t",' + TS + ',"payload":{} } ',
    '\ufeff{"id":"a","type":"t",' + TS + ',"payload":{},"k":{}}',
    '{"id":"😀","type":"\\ud83d\\ude00",' + TS + ',"payload":{"😀":1}}',
    '{"id":"a","type":"t",' + TS + ',"payload":{},"\\"":1}',
    '{"id":"a","type":"t","occurredAt":null,"payload":{},"z":1}',
    '{"id":"a"}',
    "{}",
    '{"x":1}',
]
NUMBER_RECORDS = [
    '{"id":"a","n":-0,"x":1,"ok":false,"tags":[]}',
    '{"id":"a","n":-0,"x":1,"ok":false,"tags":[],"":0}',
    '{"id":"a","n":12345678901234567890123,"x":0.10,"ok":true,"tags":[1.0]}',
    '{"id":"a","n":1,"x":1e3,"ok":true,"tags":[1e3],"m":2}',
    '{"id":"a","n":1,"x":1e1,"ok":null,"tags":null,"m":2}',
    '{"id":"a","n":1,"x":1.0,"ok":true,"tags":["E"],"m":2}',
    '{"id":"a","n":100,"x":-1E+2,"m":2}',
    '{"id":"a","n":"1","x":"2","ok":"true","tags":{},"m":2}',
    '{"id":"a","x":1.50}',
]


def _expected(text: str, fields: tuple[EventField, ...]) -> list[str] | None:
    doc = json.loads(text.lstrip("\ufeff"))
    names = {spec.name for spec in fields}
    extra = sorted(key for key in doc if key not in names)
    return extra or None


def _undeclared(spark: Any, texts: list[str], fields: tuple[EventField, ...]) -> list[Any]:
    records = [t.encode() for t in texts]
    frame = classify(raw_frame(spark, records), max_record_bytes=MAX, fields=fields)
    rows = sorted(frame.collect(), key=lambda r: int(r["sequenceNumber"]))
    return [
        (sorted(r[UNDECLARED_KEYS]) if r[UNDECLARED_KEYS] else None, r[UNDECLARED_FIELDS])
        for r in rows
    ]


def test_the_gate_misses_no_undeclared_key(spark: Any) -> None:
    for texts, fields in ((DEFAULT_RECORDS, DEFAULT_EVENT_FIELDS), (NUMBER_RECORDS, NUMBERS)):
        got = _undeclared(spark, texts, fields)
        want = [_expected(t, fields) for t in texts]
        assert [keys for keys, _ in got] == want
        for (keys, kept), text in zip(got, texts, strict=True):
            doc = json.loads(text.lstrip("\ufeff"))
            if keys is None:
                assert kept is None
            else:
                assert sorted(json.loads(kept)) == keys
                assert {k: doc[k] for k in keys} == json.loads(kept)


def test_gated_rows_still_fail_as_before(spark: Any) -> None:
    records = ['{"id":"a","type":7,' + TS + ',"payload":"p","q":null}']
    frame = classify(raw_frame(spark, [r.encode() for r in records]), max_record_bytes=MAX)
    row = frame.collect()[0]
    assert (row[REASON], row[UNDECLARED_KEYS]) == ("wrong_type", ["q"])


def test_records_that_are_not_objects_keep_nothing(spark: Any) -> None:
    # The JVM functions read the wrapper's element: for these it is no object
    # (or there is no parse at all), and they answer null, not an error.
    texts = ['["id","x"]', '"id"', "7", "null", "{", '{"id":"a"} {"x":1}', "", "\xff"]
    records = [t.encode("latin-1") for t in texts]
    frame = classify(raw_frame(spark, records), max_record_bytes=MAX)
    rows = sorted(frame.collect(), key=lambda r: int(r["sequenceNumber"]))
    assert len(rows) == len(texts)
    assert all(r[REASON] is not None for r in rows)
    assert [(r[UNDECLARED_KEYS], r[UNDECLARED_FIELDS]) for r in rows] == [(None, None)] * len(texts)


def test_a_thousand_invented_keys_all_stay_in_the_table_under_21_series(spark: Any) -> None:
    """1,000 distinct undeclared keys in one run: each is
    kept in its row's ``undeclared_fields``; the metric names the first 20
    and counts the rest under ``(other)``."""

    texts = [
        '{"id":"e' + str(i) + '","type":"t",' + TS + ',"payload":{},"invented_' + str(i) + '":1}'
        for i in range(1_000)
    ]
    got = _undeclared(spark, texts, DEFAULT_EVENT_FIELDS)
    assert [keys for keys, _ in got] == [[f"invented_{i}"] for i in range(1_000)]
    assert all(json.loads(kept) == {f"invented_{i}": 1} for i, (_, kept) in enumerate(got))
    counts = Counter(key for keys, _ in got for key in keys or ())
    series = UndeclaredKeySeries()
    datums = series.datums(tuple(counts.most_common()), datetime.now(UTC))
    assert len(datums) == contract.UNDECLARED_KEY_SERIES + 1
    assert sum(d.value for d in datums) == 1_000
    assert {d.key for d in datums if d.value > 1} == {contract.OTHER_KEYS}
