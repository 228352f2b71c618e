"""Bring the live events table up to the job's columns, at start.

The stack creates the table once, from a CloudFormation definition that must
never change for a live table (``infra/constructs/events_table.py``): an
update would replace its ``TableInput`` and leave a table no engine can read.
So every column the table gains after it was created reaches it through
Iceberg's own schema evolution, a metadata-only commit made by pyiceberg
(``update_schema``) that keeps the parameters the catalog needs; on Glue the
same commit rewrites the table's ``StorageDescriptor`` columns, which is what
Athena reads. Two kinds of columns get there this way:

* the job's own columns added to the contract since
  (:data:`model.table_layout.EVOLVED_COLUMNS`);
* the instance's event fields declared after the table was created
  (``job.event_fields``): synth lets only additive changes through
  (:mod:`infra.schema_change`), and this applies them.

Each added column is optional and appended after the others; the data files
written before it read it as null. A column whose type the declaration widened
is promoted in place, as Iceberg allows
(:data:`model.table_layout.TYPE_PROMOTIONS`: the spec's "Schema Evolution"
section, https://iceberg.apache.org/spec/#schema-evolution; Athena reads the
same promotions,
https://docs.aws.amazon.com/athena/latest/ug/querying-iceberg-evolving-table-schema.html). A
narrowing, or any other change of type, is not made here: synth refuses it, and
:func:`job.table.catalog.ensure_table` stops the job on a table that still
differs from the contract.

Runs before :func:`job.table.catalog.ensure_table`, which then finds the table
as the contract says; the job's start (``job.driver.open_table``) loads the table
once and hands the same object to both (:func:`evolve_loaded`). A table that
does not exist yet is left alone (locally the job creates it with every
column; on AWS ``ensure_table`` says the stack must create it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from job.retry import with_retries
from job.table.catalog import load_table
from job.table.schema import iceberg_schema
from model.config import EventField, JobConfig
from model.table_layout import TYPE_PROMOTIONS, table_columns

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Evolution:
    """What the live table lacks: columns to append, and columns to promote
    (name, from type, to type)."""

    added: tuple[str, ...]
    promoted: tuple[tuple[str, str, str], ...]

    @property
    def empty(self) -> bool:
        return not self.added and not self.promoted

    def describe(self) -> str:
        parts = [f"added {', '.join(self.added)}"] if self.added else []
        parts += [f"{name} {old} -> {new}" for name, old, new in self.promoted]
        return "; ".join(parts)


def plan_evolution(found: Schema, fields: Sequence[EventField]) -> Evolution:
    """Compare the table's schema with the job's columns for ``fields``: the
    columns ``found`` lacks (in the contract's order) and the types to promote.
    Columns the table has beyond the contract, and other type changes, are left
    to :func:`job.table.checks.schema_problems`."""
    have = {field.name: str(field.field_type) for field in found.fields}
    contract = iceberg_schema(fields)
    added: list[str] = []
    promoted: list[tuple[str, str, str]] = []
    for column in table_columns(fields):
        wanted = str(contract.find_field(column.name).field_type)
        if column.name not in have:
            added.append(column.name)
        elif (have[column.name], wanted) in TYPE_PROMOTIONS:
            promoted.append((column.name, have[column.name], wanted))
    return Evolution(tuple(added), tuple(promoted))


def apply_evolution(table: Table, fields: Sequence[EventField]) -> Evolution:
    """Add and promote what ``table`` lacks (re-planned from its current
    schema, so a retry after a commit that landed does nothing). One commit,
    or none."""
    plan = plan_evolution(table.schema(), fields)
    if plan.empty:
        return plan
    contract = iceberg_schema(fields)
    with table.update_schema() as update:
        for name in plan.added:
            update.add_column(name, contract.find_field(name).field_type)
        for name, _, _ in plan.promoted:
            update.update_column(name, field_type=contract.find_field(name).field_type)
    return plan


def evolve_table(config: JobConfig, catalog: Catalog | None = None) -> Evolution:
    """Bring the live table to the job's columns; what was changed."""
    try:
        table = load_table(config, catalog)
    except NoSuchTableError:
        return Evolution((), ())
    return evolve_loaded(table, config)


def evolve_loaded(table: Table, config: JobConfig) -> Evolution:
    """:func:`evolve_table` on a table already loaded (the job's start loads
    it once, evolves it, then checks it: :func:`job.table.catalog.ensure_table`)."""
    name = f"{config.database}.{config.table}"
    done = with_retries(
        lambda: apply_evolution(table, config.event_fields),
        f"evolve table {name}",
        config.catalog,
    )
    if not done.empty:
        log.info("table %s evolved: %s (docs/infra.md, 'Event schema')", name, done.describe())
    return done
