"""Events that change: which edits of ``job.event_fields`` a deploy may make.

Unit tests of the rule (:mod:`infra.schema_change`): every additive change
passes, every other change is refused with a message that names the instance,
the field, what changed and the ways out. Synth tests: an additive change
leaves the ``EventsTable`` resource byte-identical (CloudFormation never
updates the live table), a refused one stops synth.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Template

from infra.config import InstanceConfigError, load_instances
from infra.schema_change import (
    EventSchemaDeclaration,
    SchemaChangeRefusedError,
    check_schema_change,
)
from infra.stacks.application import build_app
from infra.table_definition import EVENTS_TABLE_LOGICAL_ID
from model.config import EventField
from tests.fixtures import SCHEMAS_CDK_JSON
from tests.infra.conftest import check_context

INSTANCE = "payments-eu-west-1"
SEED = EventSchemaDeclaration(
    (
        EventField("paymentId"),
        EventField("authorizedAt", "timestamp"),
        EventField("status"),
        EventField("attempts", "int"),
        EventField("amount", "long"),
        EventField("rate", "float", required=False),
        EventField("note", required=False),
    ),
    "paymentId",
    "authorizedAt",
)


def _with(*fields: EventField, id_field: str = "paymentId", time: str = "authorizedAt") -> Any:
    return EventSchemaDeclaration(tuple(fields), id_field, time)


def _replaced(name: str, new: EventField | None) -> tuple[EventField, ...]:
    out = [new if f.name == name else f for f in SEED.fields]
    return tuple(f for f in out if f is not None)


# ------------------------------------------------------------------ unit: allowed


@pytest.mark.parametrize(
    ("declared", "allowed"),
    [
        (SEED.fields, []),
        ((*SEED.fields, EventField("channel", required=False)), ["channel"]),
        ((*SEED.fields, EventField("shippedAt", "timestamp", required=False)), ["shippedAt"]),
        (_replaced("attempts", EventField("attempts", "long")), ["attempts"]),
        (_replaced("rate", EventField("rate", "double", required=False)), ["rate"]),
        (_replaced("status", EventField("status", required=False)), ["status"]),
        (tuple(reversed(SEED.fields)), []),  # order: columns are matched by name
    ],
    ids=[
        "unchanged",
        "optional-field",
        "timestamp-field",
        "int-long",
        "float-double",
        "required-optional",
        "reordered",
    ],
)
def test_additive_changes_pass(declared: tuple[EventField, ...], allowed: list[str]) -> None:
    changes = check_schema_change(INSTANCE, SEED, _with(*declared))
    assert [c.field for c in changes] == allowed


# ------------------------------------------------------------------ unit: refused


@pytest.mark.parametrize(
    ("declared", "field", "what"),
    [
        (_replaced("note", None), "note", "removed (or renamed)"),
        (
            (*_replaced("note", None), EventField("remark", required=False)),
            "note",
            "removed (or renamed)",
        ),
        (
            _replaced("amount", EventField("amount", "int")),
            "amount",
            "type long -> int: not one of Iceberg's promotions",
        ),
        (
            _replaced("amount", EventField("amount", "double")),
            "amount",
            "type long -> double: not one of Iceberg's promotions",
        ),
        (
            _replaced("status", EventField("status", "object")),
            "status",
            "type string -> object",
        ),
        (
            _replaced("note", EventField("note")),
            "note",
            "optional -> required",
        ),
        (
            (*SEED.fields, EventField("channel")),
            "channel",
            "added as required: a new field must be optional",
        ),
    ],
    ids=[
        "removed",
        "renamed",
        "narrowed",
        "long-double",
        "string-object",
        "made-required",
        "new-required",
    ],
)
def test_other_field_changes_are_refused_naming_instance_field_and_change(
    declared: tuple[EventField, ...], field: str, what: str
) -> None:
    with pytest.raises(SchemaChangeRefusedError) as raised:
        check_schema_change(INSTANCE, SEED, _with(*declared))
    message = str(raised.value)
    assert message.startswith(f"instance {INSTANCE}: job.event_fields is not an additive change")
    assert f"- field {field!r}: {what}" in message
    assert 'docs/infra.md ("Changing the events table"' in message
    assert "a new table" in message


@pytest.mark.parametrize(
    ("declared", "what"),
    [
        (
            _with(*SEED.fields, id_field="status"),
            "id_field 'paymentId' -> 'status': it is the de-duplication key",
        ),
        (
            _with(*SEED.fields, EventField("settledAt", "timestamp"), time="settledAt"),
            "event_time_field 'authorizedAt' -> 'settledAt': it is the table's partition",
        ),
    ],
    ids=["id-field", "event-time-field"],
)
def test_another_id_or_event_time_field_is_refused(
    declared: EventSchemaDeclaration, what: str
) -> None:
    with pytest.raises(SchemaChangeRefusedError, match=re.escape(what)):
        check_schema_change(INSTANCE, SEED, declared)


def test_every_refused_change_is_listed_at_once() -> None:
    declared = _with(*_replaced("note", None), EventField("channel"))
    with pytest.raises(SchemaChangeRefusedError) as raised:
        check_schema_change(INSTANCE, SEED, declared)
    lines = [line for line in str(raised.value).splitlines() if line.startswith("- field")]
    assert [line.split("'")[1] for line in lines] == ["note", "channel"]


# ------------------------------------------------------------------ config: table_seed


def _context(edit: dict[str, Any] | None = None) -> dict[str, Any]:
    """The schemas fixture, payments only, with ``edit`` merged into its entry."""
    context = json.loads(json.dumps(check_context(SCHEMAS_CDK_JSON)))
    entry = context["streaming"]["instances"][1]
    context["streaming"]["instances"] = [entry]
    for key, value in (edit or {}).items():
        entry[key] = {**entry.get(key, {}), **value} if key == "job" else value
    return context


def _payments_fields() -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = _context()["streaming"]["instances"][0]["job"]["event_fields"]
    return fields


def _grown(*extra: dict[str, Any], edit: dict[str, Any] | None = None) -> dict[str, Any]:
    """payments with its fields grown by ``extra`` and its seed pinned."""
    fields = [*_payments_fields(), *extra]
    seed = {"event_fields": _payments_fields(), "id_field": "paymentId",
            "event_time_field": "authorizedAt"}  # fmt: skip
    return _context({"job": {"event_fields": fields}, "table_seed": seed, **(edit or {})})


def test_the_seed_is_the_pinned_fields_the_seed_key_or_the_default_schema() -> None:
    (pinned,) = load_instances(_context())
    assert pinned.seed_schema() == pinned.declared_schema()
    (grown,) = load_instances(_grown({"name": "channel", "required": False}))
    assert [f.name for f in grown.seed_schema().fields] == [f["name"] for f in _payments_fields()]
    assert grown.declared_schema().fields[-1].name == "channel"
    context = _context()
    context["streaming"]["instances"] = [{"domain": "orders", "region": "eu-west-1"}]
    (orders,) = load_instances(context)
    assert orders.seed_schema().id_field == "id" and len(orders.seed_schema().fields) == 4


def test_a_seed_takes_only_the_schema_keys() -> None:
    seed = {"event_fields": _payments_fields(), "id_field": "paymentId",
            "event_time_field": "authorizedAt", "trigger_interval_sec": 3}  # fmt: skip
    with pytest.raises(InstanceConfigError, match="table_seed"):
        load_instances(_context({"table_seed": seed}))


# ------------------------------------------------------------------ synth


def _events_table(context: dict[str, Any]) -> str:
    _, stacks = build_app(context)
    (stack,) = stacks
    resource = Template.from_stack(stack).to_json()["Resources"][EVENTS_TABLE_LOGICAL_ID]
    return json.dumps(resource, sort_keys=True)


@pytest.mark.synth
def test_additive_changes_pass_synth_and_leave_the_events_table_byte_identical() -> None:
    """payments as created, then with a new optional string, a new optional
    timestamp (and its _raw column) and a required field made optional."""
    before = _events_table(_context())
    widened = [{**f, "required": False} if f["name"] == "status" else f
               for f in _payments_fields()]  # fmt: skip
    after = _events_table(
        _grown(
            {"name": "channel", "required": False},
            {"name": "shippedAt", "type": "timestamp", "required": False},
            edit={"job": {"event_fields": [
                *widened,
                {"name": "channel", "required": False},
                {"name": "shippedAt", "type": "timestamp", "required": False},
            ]}},
        )
    )  # fmt: skip
    assert after == before
    assert '"Name": "payment_id"' in before and "channel" not in after


@pytest.mark.synth
def test_a_refused_change_stops_synth_naming_the_instance() -> None:
    fields = [f for f in _payments_fields() if f["name"] != "currency"]
    seed = {"event_fields": _payments_fields(), "id_field": "paymentId",
            "event_time_field": "authorizedAt"}  # fmt: skip
    context = _context({"job": {"event_fields": fields}, "table_seed": seed})
    with pytest.raises(
        SchemaChangeRefusedError,
        match=re.escape("instance payments-eu-west-1: job.event_fields is not an additive"),
    ) as raised:
        build_app(context)
    assert "- field 'currency': removed (or renamed)" in str(raised.value)
