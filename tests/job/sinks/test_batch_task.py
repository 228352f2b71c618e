"""The batch's one pass, task side (job.sinks.batch_task) on Arrow batches
shaped as output_rows hands them over: the split by verdict, the undeclared
keys counted on valid rows only, one task's result row, and the driver's sum."""

from __future__ import annotations

import pickle
from datetime import UTC, date, datetime
from typing import Any

import pyarrow as pa
import pytest

from job.sinks import batch_task as bt
from model import record
from model.kafka_settings import KafkaSettings

SETTINGS = KafkaSettings("b:9092", "topic", "PLAINTEXT", "us-east-1", "inst", 5_000, 3_000, 5)
TABLE = ("id", "occurred_at", *(c.column for c in record.COORDINATES), record.BATCH_ID)
T0 = datetime(2026, 1, 2, 23, 30, tzinfo=UTC)
T1 = datetime(2026, 1, 3, 0, 30, tzinfo=UTC)


def _batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    """Rows in output_rows' shape (the columns the task reads)."""
    coordinate = {"string": pa.string(), "long": pa.int64(), "timestamp": pa.timestamp("us")}
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("occurred_at", pa.timestamp("us")),
            *((c.column, coordinate[c.type]) for c in record.COORDINATES),
            (record.BATCH_ID, pa.int64()),
            (record.UNDECLARED_FIELDS, pa.string()),
            (record.UNDECLARED_KEYS, pa.list_(pa.string())),
            (record.DATA, pa.binary()),
            (record.REASON, pa.string()),
            (record.MESSAGE, pa.string()),
            (record.ERROR_CLASS, pa.string()),
        ]
    )
    full = [{name: row.get(name) for name in schema.names} for row in rows]
    return pa.RecordBatch.from_pylist(full, schema=schema)


def _valid(event_id: str, at: datetime, keys: list[str] | None = None) -> dict[str, Any]:
    return {
        "id": event_id,
        "occurred_at": at.replace(tzinfo=None),
        record.STREAM.column: "s",
        record.SHARD.column: "shardId-0",
        record.SEQUENCE.column: event_id,
        record.ARRIVAL.column: at.replace(tzinfo=None),
        record.BATCH_ID: 4,
        record.UNDECLARED_KEYS: keys,
    }


def _failed(sequence: str, reason: str, keys: list[str] | None = None) -> dict[str, Any]:
    return {
        record.STREAM.column: "s",
        record.SHARD.column: "shardId-0",
        record.SEQUENCE.column: sequence,
        record.PARTITION_KEY.column: "pk",
        record.ARRIVAL.column: T0.replace(tzinfo=None),
        record.BATCH_ID: 4,
        record.UNDECLARED_KEYS: keys,
        record.DATA: b"raw-" + sequence.encode(),
        record.REASON: reason,
        record.MESSAGE: "why",
        record.ERROR_CLASS: record.ERROR_CLASSES[reason],
    }


def _replay_task() -> Any:
    """A task of a batch already committed: it writes no data file (so it
    needs no table metadata), and still sends its failures."""
    return bt.batch_task(
        SETTINGS,
        "{}",
        {},
        table_columns=TABLE,
        arrival_column=record.ARRIVAL.column,
        time_column="occurred_at",
        write_files=False,
    )


def test_split_gives_table_rows_and_failures_by_their_table_names() -> None:
    batch = _batch([_valid("a", T0), _failed("9", record.MALFORMED_JSON), _valid("b", T1)])
    valid, failed = bt.split(batch, TABLE)
    assert valid.schema.names == list(TABLE)
    assert valid.column("id").to_pylist() == ["a", "b"]
    (row,) = failed
    assert set(row) == {
        *(c.column for c in record.COORDINATES),
        record.DATA,
        record.REASON,
        record.MESSAGE,
        record.ERROR_CLASS,
    }
    assert row[record.SEQUENCE.column] == "9"
    assert row[record.DATA] == b"raw-9"
    assert row[record.ERROR_CLASS] == "JSONDecodeError"


def test_split_of_a_batch_without_failures_has_no_failure_rows() -> None:
    valid, failed = bt.split(_batch([_valid("a", T0)]), TABLE)
    assert (valid.num_rows, failed) == (1, [])


def test_undeclared_keys_are_counted_on_valid_rows_only() -> None:
    batch = _batch(
        [
            _valid("a", T0, ["channel", "Type"]),
            _valid("b", T0, ["channel"]),
            _valid("c", T0),
            _failed("9", record.MISSING_FIELD, ["channel"]),
        ]
    )
    assert bt.undeclared_key_counts(batch) == {"channel": 2, "Type": 1}
    assert bt.undeclared_key_counts(_batch([_valid("c", T0)])) == {}


def test_a_task_sends_its_failures_and_returns_one_row_of_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[list[dict[str, Any]]] = []

    def deliver(rows: Any, settings: KafkaSettings) -> int:
        assert settings is SETTINGS
        sent.append(list(rows))
        return len(sent[-1])

    monkeypatch.setattr(bt, "deliver", deliver)
    monkeypatch.setattr(bt, "keep_archive_directories", lambda: False)
    task = _replay_task()  # a replay: no data file, failures still sent
    first = _batch([_valid("a", T1, ["channel"]), _failed("8", record.NOT_UTF8)])
    second = _batch([_valid("b", T0), _failed("9", record.NOT_UTF8)])
    (out,) = list(task(iter([first, _batch([]), second])))
    (row,) = out.to_pylist()
    assert [r[record.SEQUENCE.column] for r in sent[0]] == ["8", "9"]
    assert row["sent"] == row["failures"] == 2
    assert row["rows"] == 4
    assert row["oldest_us"] == int(T0.timestamp() * 1_000_000)
    assert row["dates"] == [date(2026, 1, 2), date(2026, 1, 3)]
    assert (row["data_files"], row["records"]) == ([], 0)
    assert dict(zip(row["reasons"], row["reason_counts"], strict=True)) == {"not_utf8": 2}
    assert dict(zip(row["keys"], row["key_counts"], strict=True)) == {"channel": 1}


def test_a_task_without_failures_sends_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def deliver(rows: Any, settings: KafkaSettings) -> int:
        raise AssertionError("no failure, no producer")

    monkeypatch.setattr(bt, "deliver", deliver)
    monkeypatch.setattr(bt, "keep_archive_directories", lambda: False)
    task = _replay_task()
    (out,) = list(task(iter([_batch([_valid("a", T0)])])))
    assert out.to_pylist()[0]["sent"] == 0


def test_combine_sums_every_tasks_row() -> None:
    files = [pickle.dumps({"file": 1}), pickle.dumps({"file": 2})]
    rows = [
        {
            "sent": 1, "rows": 5, "failures": 1, "records": 4, "oldest_us": 20,
            "dates": [date(2026, 1, 3)], "data_files": files[:1],
            "reasons": ["not_utf8"], "reason_counts": [1],
            "keys": ["channel"], "key_counts": [3],
        },
        {
            "sent": 2, "rows": 7, "failures": 2, "records": 5, "oldest_us": 10,
            "dates": [date(2026, 1, 2), date(2026, 1, 3)], "data_files": files[1:],
            "reasons": ["not_utf8", "too_large"], "reason_counts": [1, 1],
            "keys": ["channel", "Type"], "key_counts": [1, 2],
        },
        {
            "sent": 0, "rows": 0, "failures": 0, "records": 0, "oldest_us": None,
            "dates": None, "data_files": None, "reasons": None, "reason_counts": None,
            "keys": None, "key_counts": None,
        },
    ]  # fmt: skip
    outcome = bt.combine(rows)
    assert (outcome.sent, outcome.rows, outcome.failures, outcome.records) == (3, 12, 3, 9)
    assert outcome.oldest_us == 10
    assert outcome.dates == (date(2026, 1, 2), date(2026, 1, 3))
    assert outcome.data_files == [{"file": 1}, {"file": 2}]
    assert outcome.failures_by_reason == {"not_utf8": 2, "too_large": 1}
    assert list(outcome.undeclared_keys.items()) == [("channel", 4), ("Type", 2)]
