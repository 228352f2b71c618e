"""Bring an older events table up to the job's columns, at start.

The stack creates the table once, from a CloudFormation definition that must
never change for a live table (``infra/constructs/events_table.py``): an
update would replace its ``TableInput`` and leave a table no engine can read.
Columns added to the contract since (:data:`app.table.layout.EVOLVED_COLUMNS`)
therefore reach a deployed table through Iceberg's own schema evolution, a
metadata-only commit made by pyiceberg (``update_schema``) that keeps the
parameters the catalog needs: the path docs/infra.md ("Changing the events
table") prescribes. Each added column is optional and appended after the
others; the data files written before it read it as null.

Runs before :func:`app.table.catalog.ensure_table`, which then finds
the table as the contract says. A table that does not exist yet is left alone
(locally the job creates it with every column; on AWS ``ensure_table`` says
the stack must create it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from app.retry import with_retries
from app.table.catalog import load_table
from app.table.layout import evolved_columns
from app.table.schema import iceberg_schema

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

    from app.config import JobConfig

log = logging.getLogger(__name__)


def missing_columns(found: Schema) -> list[str]:
    """The evolved columns ``found`` lacks, in the order they were added."""
    have = {field.name for field in found.fields}
    return [column.name for column in evolved_columns() if column.name not in have]


def add_missing_columns(table: Table, contract: Schema) -> list[str]:
    """Add the evolved columns ``table`` lacks (types from ``contract``, the
    full table schema); returns their names. One commit, or none."""
    names = missing_columns(table.schema())
    if not names:
        return []
    with table.update_schema() as update:
        for name in names:
            update.add_column(name, contract.find_field(name).field_type)
    return names


def evolve_table(config: JobConfig, catalog: Catalog | None = None) -> list[str]:
    """Add the evolved columns the live table lacks; the names added."""
    from pyiceberg.exceptions import NoSuchTableError

    name = f"{config.database}.{config.table}"
    try:
        table = load_table(config, catalog)
    except NoSuchTableError:
        return []
    contract = iceberg_schema(config.event_fields)
    added = with_retries(
        lambda: add_missing_columns(table, contract), f"evolve table {name}", config.catalog
    )
    if added:
        log.info("table %s: added column(s) %s (docs/infra.md)", name, ", ".join(added))
    return added
