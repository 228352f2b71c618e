"""What the job checks of an existing table at start, as lines to show.

:func:`job.table.catalog.ensure_table` stops the job with a
:class:`~model.config.ConfigError` (exit code 2) carrying these lines when the
table's columns are not the event contract's (:mod:`model.table_layout`), or its
partitioning is not :func:`model.table_layout.partitioning`'s. A table
partitioned otherwise is refused with the steps that re-partition it in place:
the job's data files are laid out by the expected spec, so it cannot simply
write into another one.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.schema import Schema
from pyiceberg.table import Table

from job.table.schema import iceberg_transform, iceberg_type
from model.config import EventField
from model.table_layout import Partitioning, table_columns


def schema_problems(table_name: str, found: Schema, fields: Sequence[EventField]) -> list[str]:
    """One line per column that differs from the contract (empty: it matches).
    Names are compared exactly; types by Iceberg's type name."""
    expected = {col.name: str(iceberg_type(col.type)) for col in table_columns(fields)}
    actual = {f.name: str(f.field_type) for f in found.fields}
    lines: list[str] = []
    for name, kind in expected.items():
        if name not in actual:
            lines.append(f"table {table_name}: column {name!r} is missing; expected {kind}")
        elif actual[name] != kind:
            lines.append(f"table {table_name}: column {name!r} is {actual[name]}; expected {kind}")
    for name in actual.keys() - expected.keys():
        lines.append(
            f"table {table_name}: column {name!r} ({actual[name]}) is not an event column; "
            f"expected only {', '.join(expected)}"
        )
    return lines


def _partition_fields(table: Table) -> list[tuple[str, str]]:
    """Each field of the table's spec: its name and ``transform(column)``."""
    schema = table.schema()
    return [
        (f.name, f"{f.transform}({schema.find_column_name(f.source_id)})")
        for f in table.spec().fields
    ]


def repartition_steps(found: Table, wanted: Partitioning) -> list[str]:
    """The pyiceberg statements that turn ``found``'s spec into ``wanted``
    alone, with ``table`` standing for the loaded table."""
    fields = _partition_fields(found)
    transform = type(iceberg_transform(wanted.transform)).__name__
    lines = [
        f"from pyiceberg.transforms import {transform}",
        "with table.update_spec() as spec:",
        *(f'    spec.remove_field("{name}")' for name, shown in fields if shown != str(wanted)),
    ]
    if str(wanted) not in (shown for _, shown in fields):
        lines.append(
            f'    spec.add_field("{wanted.source_column}", {transform}(), "{wanted.field_name}")'
        )
    return lines


def spec_problems(table_name: str, table: Table, wanted: Partitioning) -> list[str]:
    """Empty when ``table`` is partitioned by ``wanted`` alone; otherwise what
    was found, what is expected and how to re-partition the table in place (a
    metadata-only commit: files written before keep their layout and stay
    readable)."""
    found = [shown for _, shown in _partition_fields(table)]
    if found == [str(wanted)]:
        return []
    steps = "\n".join(f"       {line}" for line in repartition_steps(table, wanted))
    return [
        f"table {table_name}: partitioned by [{', '.join(found)}]; expected [{wanted}] "
        "(model/table_layout.py, partitioning). The job lays out its data files by the "
        "expected spec, so it did not start. To re-partition the table in place (metadata "
        "only: files written before keep their layout and stay readable):\n"
        "  1. load the table with pyiceberg from the same catalog, e.g. on AWS\n"
        f'       table = load_catalog("glue", type="glue").load_table("{table_name}")\n'
        "     (from pyiceberg.catalog import load_catalog);\n"
        "  2. run:\n"
        f"{steps}\n"
        "  3. start the job again (make redeploy INSTANCE=<instance>; locally, run it again)."
    ]
