"""The record vocabulary (model.record): each name once in each world, the
table's columns and the taxonomy derived from its rows."""

from __future__ import annotations

from model import record


def test_each_coordinate_has_its_own_name_in_every_world() -> None:
    for world in ("source", "column", "header"):
        names = [getattr(c, world) for c in record.COORDINATES]
        assert len(set(names)) == len(record.COORDINATES), world
    assert record.DATA not in {c.source for c in record.COORDINATES}


def test_the_table_holds_every_coordinate_once_and_the_source_rows_too() -> None:
    table = [name for name, _ in (*record.SEED_COLUMNS, *record.EVOLVED_COLUMNS)]
    assert sorted(c.column for c in record.COORDINATES) == sorted(
        name for name in table if name not in (record.BATCH_ID, record.UNDECLARED_FIELDS)
    )
    assert record.SOURCE_COLUMNS[: len(record.CONNECTOR_COLUMNS)] == record.CONNECTOR_COLUMNS
    assert set(record.SOURCE_COLUMNS) == {record.DATA, *(c.source for c in record.COORDINATES)}


def test_a_field_becomes_its_column_and_a_timestamp_keeps_its_text() -> None:
    assert record.field_columns("occurredAt", "timestamp") == (
        ("occurred_at", "timestamp"),
        ("occurred_at_raw", "string"),
    )
    assert record.field_columns("payload", "object") == (("payload", "string"),)
    assert record.field_columns("amountMinor", "long") == (("amount_minor", "long"),)


def test_the_taxonomy_names_each_reason_and_error_class_once_in_precedence_order() -> None:
    assert tuple(r.name for r in record.TAXONOMY) == record.REASONS
    assert record.REASONS[0] == record.TOO_LARGE
    assert record.REASONS[-1] == record.BAD_TIMESTAMP
    assert len(set(record.ERROR_CLASSES.values())) == len(record.TAXONOMY)
