"""Which changes to an instance's event schema a deploy may make to its live table.

The stack creates the events table once, from its **seed**: the event schema
the table was created with (``InstanceConfig.table_seed``; the default schema
for an instance that never declared its own). The CloudFormation definition is
built from the seed alone and pinned by its SHA-256 (``table_definition_sha256``,
:mod:`infra.table_definition`), so it never changes for a live table:
an update would replace its ``TableInput`` and leave a table no engine can read.

The declared schema (``job.event_fields``, ``job.id_field``,
``job.event_time_field``) may grow past the seed; the new job version then
evolves the live Iceberg table at start (:mod:`job.table.evolution`). Synth lets
through only what Iceberg's schema evolution does without touching a data file
and what keeps every row written before valid
(https://iceberg.apache.org/spec/#schema-evolution):

* a new optional field (its column is appended; a new ``timestamp`` field also
  brings its ``<column>_raw`` string column);
* a type promotion Iceberg allows (:data:`PROMOTIONS`: ``int -> long``,
  ``float -> double``);
* a required field made optional.

Everything else is refused (:func:`check_schema_change`): removing or renaming
a field, any other type change (a narrowing included), an optional field made
required, a new required field, another ``id_field`` or ``event_time_field``.
Each refusal names the instance, the field, what changed and the ways out.

Pure logic, no CDK: unit-tested on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from model.table_layout import TYPE_PROMOTIONS

if TYPE_CHECKING:
    from model.config import EventField

# Iceberg's promotions between the job's field types, which are named as their
# columns' Iceberg types (the spec, "Schema Evolution"; Athena reads the same
# ones, https://docs.aws.amazon.com/athena/latest/ug/querying-iceberg-evolving-table-schema.html).
PROMOTIONS: Final = TYPE_PROMOTIONS

_WAYS_OUT: Final = (
    "Ways out: restore the field as the table was created with it "
    '(the instance\'s "table_seed", or the default event schema); or give the new '
    "schema a new table (a new instance, or a new table created by hand and imported); "
    'or migrate the live table step by step as docs/infra.md ("Changing the events '
    'table", non-additive changes) describes.'
)


class SchemaChangeRefusedError(ValueError):
    """The declared event schema is not an additive change of the table's seed."""


@dataclass(frozen=True)
class EventSchemaDeclaration:
    """An event schema: its fields, the id field and the event-time field."""

    fields: tuple[EventField, ...]
    id_field: str
    event_time_field: str

    def field(self, name: str) -> EventField | None:
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class Change:
    """One difference between the seed and the declaration."""

    field: str
    what: str
    allowed: bool


def _field_changes(seed: EventField, now: EventField) -> list[Change]:
    changes: list[Change] = []
    if seed.type != now.type:
        if (seed.type, now.type) in PROMOTIONS:
            changes.append(Change(now.name, f"type {seed.type} -> {now.type} (promotion)", True))
        else:
            changes.append(
                Change(
                    now.name,
                    f"type {seed.type} -> {now.type}: not one of Iceberg's promotions "
                    f"({', '.join(f'{a} -> {b}' for a, b in sorted(PROMOTIONS))}); rows "
                    f"written before hold {seed.type} values",
                    False,
                )
            )
    if seed.required and not now.required:
        changes.append(Change(now.name, "required -> optional", True))
    elif not seed.required and now.required:
        changes.append(
            Change(
                now.name,
                "optional -> required: rows written before may lack it, and events "
                "without it would start failing",
                False,
            )
        )
    return changes


def schema_changes(seed: EventSchemaDeclaration, now: EventSchemaDeclaration) -> list[Change]:
    """Every difference between the table's seed and the declared schema, in
    the seed's field order, then the new fields, then the key fields."""
    changes: list[Change] = []
    for spec in seed.fields:
        found = now.field(spec.name)
        if found is None:
            changes.append(
                Change(
                    spec.name,
                    "removed (or renamed): its column holds the rows written before",
                    False,
                )
            )
        else:
            changes.extend(_field_changes(spec, found))
    for spec in now.fields:
        if seed.field(spec.name) is not None:
            continue
        if spec.required:
            changes.append(
                Change(
                    spec.name,
                    "added as required: a new field must be optional "
                    '("required": false), rows written before do not have it',
                    False,
                )
            )
        else:
            changes.append(Change(spec.name, f"added ({spec.type}, optional)", True))
    for attr, label in (("id_field", "id_field"), ("event_time_field", "event_time_field")):
        before, after = getattr(seed, attr), getattr(now, attr)
        if before != after:
            why = (
                "the de-duplication key of every row written"
                if attr == "id_field"
                else "the table's partition source and event time"
            )
            changes.append(Change(after, f"{label} {before!r} -> {after!r}: it is {why}", False))
    return changes


def is_additive(seed: EventSchemaDeclaration, now: EventSchemaDeclaration) -> bool:
    """True when a deploy may take the table from ``seed`` to ``now``."""
    return all(change.allowed for change in schema_changes(seed, now))


def check_schema_change(
    instance_id: str, seed: EventSchemaDeclaration, now: EventSchemaDeclaration
) -> list[Change]:
    """The allowed changes (what the new job version applies at start); raises
    :class:`SchemaChangeRefusedError` listing every refused one."""
    changes = schema_changes(seed, now)
    refused = [c for c in changes if not c.allowed]
    if refused:
        lines = "\n".join(f"- field {c.field!r}: {c.what}" for c in refused)
        raise SchemaChangeRefusedError(
            f"instance {instance_id}: job.event_fields is not an additive change of the "
            "event schema its events table was created with (its seed), so the live "
            f"table cannot follow it:\n{lines}\n"
            "Allowed by a deploy: a new optional field, int -> long, float -> double, a "
            "required field made optional.\n" + _WAYS_OUT
        )
    return [c for c in changes if c.allowed]
