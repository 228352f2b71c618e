"""A schema per instance: ``job.event_fields``, ``job.id_field`` and
``job.event_time_field`` in ``cdk.json`` give each instance's Glue table its
columns and its job the fields it checks; bad declarations stop synth naming
the instance and the field; a table whose fields changed after it was created
is refused (the definition guard, per instance).

The two instances of tests/fixtures/cdk_schemas.json (orders with the default
fields, payments with its own) are the known shape: the repository's cdk.json
is the user's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from artifacts.packaging import JOB_CONFIG_FILE
from infra.config import InstanceConfigError, load_instances
from infra.constructs.events_table import EventsTable, EventsTableProps
from infra.stacks.application import build_app
from infra.table_definition import (
    DEPLOYED_DEFINITION_SHA256,
    EVENTS_TABLE_LOGICAL_ID,
    TableDefinitionChangedError,
    check_definition,
    definition_fingerprint,
)
from model import contract
from model.config import DEFAULT_EVENT_FIELDS, EventField, JobConfig, TableMaintenance
from tests.fixtures import SCHEMAS_CDK_JSON
from tests.infra.conftest import Synthesized, check_context, synthesize

ORDERS = contract.stack_name("orders", "eu-west-1")
PAYMENTS = contract.stack_name("payments", "eu-west-1")
PAYMENT_COLUMNS = [
    ("payment_id", "string"),
    ("status", "string"),
    ("amount_minor", "bigint"),
    ("currency", "string"),
    ("authorized_at", "timestamp"),
    ("authorized_at_raw", "string"),
    ("captured_at", "timestamp"),
    ("captured_at_raw", "string"),
    ("refunded", "boolean"),
    ("metadata", "string"),
    ("tags", "string"),
    ("fx_rate", "double"),
]
ORDER_COLUMNS = [
    ("id", "string"),
    ("type", "string"),
    ("occurred_at", "timestamp"),
    ("occurred_at_raw", "string"),
    ("payload", "string"),
]
SOURCE_COLUMNS = [
    ("stream_name", "string"),
    ("shard_id", "string"),
    ("sequence_number", "string"),
    ("partition_key", "string"),
    ("arrival_time", "timestamp"),
    ("batch_id", "bigint"),
]
DEPLOY_TIME_MARKER = re.compile(r"<<marker:[^>]*>>")
DATABASE = "streaming_payments_eu_west_1"
PREFIX = f"warehouse/{DATABASE}.db/"
# Two differing field sets: what a payments table was created with, and an edit.
FIELDS_A = (
    EventField("paymentId"),
    EventField("authorizedAt", "timestamp"),
    EventField("amountMinor", "long"),
)
FIELDS_B = (*FIELDS_A, EventField("currency"))


def _keys_and(extra: dict[str, Any]) -> dict[str, Any]:
    """A job section of the two key fields and ``extra``."""
    keys = [{"name": "paymentId"}, {"name": "authorizedAt", "type": "timestamp"}]
    return {"event_fields": [*keys, extra]}


def _context() -> dict[str, Any]:
    return check_context(SCHEMAS_CDK_JSON)


def _instances(edit: dict[str, Any], index: int = 1) -> dict[str, Any]:
    """The fixture's context with ``edit`` merged into instance ``index``
    (a ``job`` edit replaces the keys it names inside ``job``)."""
    context = json.loads(json.dumps(_context()))
    entry = context["streaming"]["instances"][index]
    for key, value in edit.items():
        if key == "job":
            entry["job"] = {**entry.get("job", {}), **value}
        elif value is None:
            entry.pop(key, None)
        else:
            entry[key] = value
    return context


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synthesize(_context(), tmp_path_factory.mktemp("cdk.out.schemas"))


def _columns(synthesized: Synthesized, name: str) -> list[tuple[str, str]]:
    table = synthesized.templates[name]["Resources"][EVENTS_TABLE_LOGICAL_ID]
    columns = table["Properties"]["TableInput"]["StorageDescriptor"]["Columns"]
    return [(c["Name"], c["Type"]) for c in columns]


# ------------------------------------------------------------------ synth: two schemas


@pytest.mark.synth
def test_two_instances_get_glue_tables_with_their_own_columns(schemas: Synthesized) -> None:
    assert schemas.error is None, schemas.error
    assert _columns(schemas, ORDERS) == [*ORDER_COLUMNS, *SOURCE_COLUMNS]
    assert _columns(schemas, PAYMENTS) == [*PAYMENT_COLUMNS, *SOURCE_COLUMNS]


@pytest.mark.synth
def test_each_job_gets_its_instances_fields_in_the_config_it_is_shipped(
    schemas: Synthesized,
) -> None:
    """The job reads the JSON the stack uploads beside its package (the EMR
    step names it); each instance's carries that instance's schema."""
    shipped: dict[str, JobConfig] = {}
    outdir = schemas.template_paths[ORDERS].parent
    for path in outdir.rglob(JOB_CONFIG_FILE):
        # Values known at deploy time only (bucket names, the MSK ARN) are
        # CDK markers in the asset, replaced by strings on upload.
        text = DEPLOY_TIME_MARKER.sub('"deploy-time"', path.read_text(encoding="utf-8"))
        config = JobConfig.from_json(text, str(path))
        shipped[config.instance_id] = config
    orders = shipped["orders-eu-west-1"]
    payments = shipped["payments-eu-west-1"]
    assert orders.event_fields == DEFAULT_EVENT_FIELDS
    assert (orders.id_field, orders.event_time_field) == ("id", "occurredAt")
    assert [f.name for f in payments.event_fields][:2] == ["paymentId", "status"]
    assert payments.event_fields == schemas.config(PAYMENTS).job.event_fields
    assert (payments.id_field, payments.event_time_field) == ("paymentId", "authorizedAt")


# ------------------------------------------------------------------ bad declarations


def _assert_refused(job: dict[str, Any], field: str, expected: str) -> None:
    """Synth stops on instance 1 declaring ``job``, naming the instance, the
    field and what is allowed (``expected``)."""
    with pytest.raises(InstanceConfigError) as raised:
        load_instances(_instances({"job": job}))
    message = str(raised.value)
    where = f"instance instances[1] (payments/eu-west-1): field {field}:"
    assert f"{where} bad value" in message or f"{where} unknown field" in message, message
    assert expected in message


@pytest.mark.parametrize(
    ("job", "field", "expected"),
    [
        (
            {"event_fields": [{"name": "paymentId"}, {"name": "at", "type": "decimal"}]},
            "job.event_fields[1].type",
            "allowed: string | int | long | float | double | boolean | timestamp | object | array",
        ),
        (
            {"id_field": "orderId"},
            "job.id_field",
            "the name of a required string field of event_fields (declared: paymentId, status",
        ),
        ({"event_fields": []}, "job.event_fields", "a non-empty list"),
        (
            {"event_fields": [{"name": "paymentId", "kind": "string"}]},
            "job.event_fields[0].kind",
            "unknown field; allowed: name, required, type",
        ),
    ],
    ids=["unknown-type", "id-not-declared", "empty", "unknown-key"],
)
def test_a_bad_schema_stops_synth_naming_instance_field_and_what_is_allowed(
    job: dict[str, Any], field: str, expected: str
) -> None:
    _assert_refused(job, field, expected)


@pytest.mark.parametrize(
    ("event_time_field", "expected"),
    [
        ("amountMinor", "the name of a required timestamp field of event_fields"),
        ("capturedAt", "a required timestamp field"),  # a timestamp, but optional
    ],
    ids=["time-not-a-timestamp", "time-optional"],
)
def test_an_event_time_field_that_is_no_required_timestamp_stops_synth(
    event_time_field: str, expected: str
) -> None:
    _assert_refused({"event_time_field": event_time_field}, "job.event_time_field", expected)


@pytest.mark.parametrize(
    ("added", "expected"),
    [
        ({"name": "paymentId", "type": "long"}, "a name not used by another event field"),
        ({"name": "shardId"}, "table column ('shard_id') is not one of the job's own columns"),
        (
            {"name": "data", "type": "object"},
            "table column ('data') is not one of the job's own columns",
        ),
        ({"name": "authorized_at_raw"}, "no other field has (field 'authorizedAt' has it)"),
        ({"name": "_internal"}, "starts with a letter"),
    ],
    ids=["duplicate-name", "source-column", "source-row-column", "raw-column-clash", "underscore"],
)
def test_a_field_added_beside_the_keys_with_a_bad_name_stops_synth(
    added: dict[str, Any], expected: str
) -> None:
    _assert_refused(_keys_and(added), "job.event_fields[2].name", expected)


def test_a_malformed_pin_is_refused_by_name() -> None:
    with pytest.raises(InstanceConfigError, match=r"field table_definition_sha256: bad value"):
        load_instances(_instances({"table_definition_sha256": "A7C7"}))


def test_an_instance_that_declares_nothing_keeps_the_default_fields() -> None:
    orders, payments = load_instances(_context())
    assert orders.job.event_fields == DEFAULT_EVENT_FIELDS
    assert (orders.job.id_field, orders.job.event_time_field) == ("id", "occurredAt")
    assert orders.table_definition_sha256 is None
    assert payments.job.event_fields != DEFAULT_EVENT_FIELDS


# ------------------------------------------------------------------ the definition guard


def test_the_guard_refuses_fields_other_than_the_table_was_created_with() -> None:
    """A table created with fields A, declared now with fields B: refused with
    both ways out (pin a new table, migrate a deployed one)."""
    created = definition_fingerprint(FIELDS_A, DATABASE, PREFIX)
    check_definition(FIELDS_A, DATABASE, PREFIX, created)
    with pytest.raises(TableDefinitionChangedError) as raised:
        check_definition(FIELDS_B, DATABASE, PREFIX, created)
    message = str(raised.value)
    now = definition_fingerprint(FIELDS_B, DATABASE, PREFIX)
    assert now != created
    assert f"events table {DATABASE}.events" in message
    assert f"(sha256 {now}; columns from job.event_fields: payment_id string" in message
    assert "currency string" in message
    assert f"({created}, the instance's table_definition_sha256)" in message
    assert f'"table_definition_sha256": "{now}"' in message
    assert "metadata_location" in message
    assert 'docs/infra.md ("Changing the events table")' in message


def test_the_guard_refuses_own_fields_on_a_default_schema_table() -> None:
    """No pin: the table is the default schema's; other fields are a change."""
    check_definition(DEFAULT_EVENT_FIELDS, DATABASE, PREFIX, None)
    with pytest.raises(TableDefinitionChangedError, match="DEPLOYED_DEFINITION_SHA256"):
        check_definition(FIELDS_A, DATABASE, PREFIX, None)
    with pytest.raises(TableDefinitionChangedError):
        check_definition(
            DEFAULT_EVENT_FIELDS,
            DATABASE,
            PREFIX,
            definition_fingerprint(FIELDS_A, DATABASE, PREFIX),
        )


def _table(fields: tuple[EventField, ...], pin: str | None) -> dict[str, Any]:
    app = cdk.App()
    stack = cdk.Stack(app, "Bare", env=cdk.Environment(region="eu-west-1"))
    EventsTable(
        stack,
        "Events",
        props=EventsTableProps(
            database_name=DATABASE,
            bucket=s3.Bucket(stack, "Data"),
            database_prefix=PREFIX,
            fields=fields,
            maintenance=TableMaintenance(),
            removal_policy=cdk.RemovalPolicy.RETAIN,
            deployed_sha256=pin,
        ),
    )
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


def test_the_construct_applies_the_pin_of_its_instance() -> None:
    pin_a = definition_fingerprint(FIELDS_A, DATABASE, PREFIX)
    columns = _table(FIELDS_A, pin_a)["Resources"][EVENTS_TABLE_LOGICAL_ID]["Properties"][
        "TableInput"
    ]["StorageDescriptor"]["Columns"]
    assert [c["Name"] for c in columns][:4] == [
        "payment_id",
        "authorized_at",
        "authorized_at_raw",
        "amount_minor",
    ]
    with pytest.raises(TableDefinitionChangedError):
        _table(FIELDS_B, pin_a)
    with pytest.raises(TableDefinitionChangedError):
        _table(FIELDS_A, None)
    assert pin_a != DEPLOYED_DEFINITION_SHA256


@pytest.mark.synth
@pytest.mark.parametrize(
    "edit",
    [
        # payments' fields changed after its table was created with the pinned ones
        {
            "job": {
                "event_fields": [
                    {"name": "paymentId"},
                    {"name": "authorizedAt", "type": "timestamp"},
                ]
            }
        },
        # payments' own fields with its pin removed: compared to the default table
        {"table_definition_sha256": None},
    ],
    ids=["fields-edited", "pin-removed"],
)
def test_a_stack_whose_table_fields_changed_is_refused_at_synth(edit: dict[str, Any]) -> None:
    """An unpinned table of its own fields is refused with the configuration,
    in one line naming the pin; a pinned one whose fields moved, by the table."""
    context = _instances(edit)
    context["streaming"]["instances"] = context["streaming"]["instances"][1:]
    with pytest.raises(
        (TableDefinitionChangedError, InstanceConfigError),
        match=re.escape(f"events table {DATABASE}.events"),
    ):
        build_app(context)


@pytest.mark.synth
def test_orders_taking_the_payments_fields_is_refused_at_synth() -> None:
    """The default-schema instance (no pin) given another schema: refused."""
    payments_job = _context()["streaming"]["instances"][1]["job"]
    context = _instances({"job": payments_job}, index=0)
    context["streaming"]["instances"] = context["streaming"]["instances"][:1]
    with pytest.raises(
        InstanceConfigError,
        match=r'table_definition_sha256: bad value None; allowed: "[0-9a-f]{64}" '
        + re.escape("(events table streaming_orders_eu_west_1.events"),
    ):
        build_app(context)


def test_the_fixture_pins_what_its_fields_give() -> None:
    """The fixture's pin is the fingerprint of its own fields (a copy-paste
    from the refusal message, as a user would do)."""
    raw = json.loads(Path(SCHEMAS_CDK_JSON).read_text(encoding="utf-8"))
    entry = raw["context"]["streaming"]["instances"][1]
    (_, payments) = load_instances(_context())
    assert entry["table_definition_sha256"] == definition_fingerprint(
        payments.job.event_fields, DATABASE, PREFIX
    )
