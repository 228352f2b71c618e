"""``make run``'s producer makes each instance's own events (pure, no Spark).

The checker below is the job's taxonomy (job/transform.py) written out for
one parsed record: a valid event of the mix must pass it for its own
instance's fields, and each malformed kind must fail it for the reason the
mix says, on that instance's own fields. The two instances are those of
tests/fixtures/cdk_schemas.json (orders: the default fields, payments: its own).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from infra.config import load_instances, read_cdk_context
from job.transform import ISO_TIMESTAMP
from model.config import DEFAULT_EVENT_FIELDS, EventField
from model.record import BAD_AGGREGATE, BAD_TIMESTAMP, MISSING_FIELD, TOO_LARGE, WRONG_TYPE
from producer import producer
from producer.events import (
    DEFAULT_SCHEMA,
    DUPLICATE,
    FAILURE_KINDS,
    VALID,
    EventSchema,
    MixSpec,
    carrying,
    generate,
)
from tests.fixtures import SCHEMAS_CDK_JSON

START = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
TIMESTAMP = re.compile(ISO_TIMESTAMP)


def _schemas() -> dict[str, EventSchema]:
    instances = load_instances(read_cdk_context(SCHEMAS_CDK_JSON))
    return {i.domain: EventSchema.of(i.job) for i in instances}


def _type_ok(spec: EventField, value: object) -> bool:
    if spec.type in ("string", "timestamp"):
        return isinstance(value, str)
    if spec.type == "long":
        return isinstance(value, int) and not isinstance(value, bool)
    if spec.type == "double":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if spec.type == "boolean":
        return isinstance(value, bool)
    if spec.type == "object":
        return isinstance(value, dict)
    return isinstance(value, list)


def judge(schema: EventSchema, data: bytes) -> str | None:
    """The job's verdict on a single-JSON-object record: None when valid,
    else ``reason: field``."""
    body = json.loads(data)
    assert isinstance(body, dict)
    for spec in schema.fields:
        if spec.required and body.get(spec.name) is None:
            return f"{MISSING_FIELD}: {spec.name}"
    for spec in schema.fields:
        value = body.get(spec.name)
        if value is not None and not _type_ok(spec, value):
            return f"{WRONG_TYPE}: {spec.name}"
    for spec in schema.fields:
        value = body.get(spec.name)
        if spec.type == "timestamp" and value is not None and not TIMESTAMP.match(str(value)):
            return f"{BAD_TIMESTAMP}: {spec.name}"
    return None


@pytest.mark.parametrize("domain", ["orders", "payments"])
def test_every_valid_event_of_the_mix_is_valid_for_its_instance(domain: str) -> None:
    schema = _schemas()[domain]
    records = generate(MixSpec(count=300, seed=3, schema=schema), START)
    valid = [r for r in records if r.kind in (VALID, DUPLICATE)]
    assert len(valid) > 250
    for record in valid:
        assert judge(schema, record.data) is None, record.data
        body = json.loads(record.data)
        assert list(body) == [f.name for f in schema.fields], "every field, in schema order"
        assert body[schema.id_field] == record.event_id


def test_the_two_instances_events_are_not_interchangeable() -> None:
    """What makes the test above able to fail: an orders event is not a
    payment, nor the reverse."""
    schemas = _schemas()
    orders = generate(MixSpec(count=5, malformed_share=0, duplicate_share=0), START)
    payments = generate(
        MixSpec(count=5, malformed_share=0, duplicate_share=0, schema=schemas["payments"]), START
    )
    assert schemas["orders"] == DEFAULT_SCHEMA
    assert {judge(schemas["payments"], r.data) for r in orders} == {f"{MISSING_FIELD}: paymentId"}
    assert {judge(schemas["orders"], r.data) for r in payments} == {f"{MISSING_FIELD}: id"}


@pytest.mark.parametrize("domain", ["orders", "payments"])
def test_each_malformed_kind_breaks_the_instances_own_fields(domain: str) -> None:
    schema = _schemas()[domain]
    spec = MixSpec(
        count=len(FAILURE_KINDS) * 3,
        malformed_share=1.0,
        duplicate_share=0.0,
        failure_kinds=FAILURE_KINDS,
        too_large_bytes=4096,
        schema=schema,
    )
    verdicts: dict[str, set[str | None]] = {}
    for record in generate(spec, START):
        if record.kind in (MISSING_FIELD, WRONG_TYPE, BAD_TIMESTAMP, TOO_LARGE):
            verdicts.setdefault(record.kind, set()).add(judge(schema, record.data))
        if record.kind == TOO_LARGE:
            assert len(record.data) == 4096
        if record.kind not in (BAD_AGGREGATE, MISSING_FIELD):
            assert schema.id_field.encode() in record.data, "the id is the instance's"
    wrong = schema.wrong_type_field.name
    assert verdicts == {
        MISSING_FIELD: {f"{MISSING_FIELD}: {schema.id_field}"},
        WRONG_TYPE: {f"{WRONG_TYPE}: {wrong}"},
        BAD_TIMESTAMP: {f"{BAD_TIMESTAMP}: {schema.event_time_field}"},
        TOO_LARGE: {None},  # only its size is wrong
    }


def test_payments_wrong_type_targets_its_own_last_field() -> None:
    payments = _schemas()["payments"]
    assert payments.wrong_type_field.name == "fxRate"
    assert DEFAULT_SCHEMA.wrong_type_field.name == "payload"
    # A number field is broken with a string, the others with a number.
    only_keys = EventSchema((EventField("k"), EventField("t", "timestamp")), "k", "t")
    assert only_keys.wrong_type_field.name == "k"


def test_the_default_mix_is_the_default_fields() -> None:
    (record,) = generate(MixSpec(count=1, malformed_share=0, duplicate_share=0), START)
    assert list(json.loads(record.data)) == [f.name for f in DEFAULT_EVENT_FIELDS]


def test_the_producer_reads_an_instances_schema_from_cdk_json() -> None:
    assert (
        producer.instance_schema("payments-eu-west-1", SCHEMAS_CDK_JSON) == (_schemas()["payments"])
    )
    with pytest.raises(ValueError, match=r"allowed: orders-eu-west-1, payments-eu-west-1"):
        producer.instance_schema("refunds-eu-west-1", SCHEMAS_CDK_JSON)
    args = producer.parse_args(
        ["--stream", "s", "--region", "eu-west-1", "--instance", "payments-eu-west-1"]
    )
    assert args.instance == "payments-eu-west-1"
    spec = producer.spec_from_args(args, _schemas()["payments"])
    assert spec.schema.id_field == "paymentId"


def test_a_share_of_valid_events_carries_an_undeclared_key_the_rest_unchanged() -> None:
    start = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    plain = generate(MixSpec(count=1000, seed=3), start)
    keyed = generate(MixSpec(count=1000, seed=3, undeclared_key="channel", undeclared_share=0.2),
                     start)  # fmt: skip
    valid = [r for r in keyed if r.kind == "valid"]
    assert len(carrying(keyed, "channel")) == round(len(valid) * 0.2)
    assert [r.event_id for r in keyed] == [r.event_id for r in plain], "the same mix otherwise"
    changed = [a for a, b in zip(keyed, plain, strict=True) if a.data != b.data]
    assert all(a.event_id in carrying(keyed, "channel") for a in changed)
    with pytest.raises(ValueError, match="declares it already"):
        MixSpec(count=1, undeclared_key="id", undeclared_share=0.5)
    with pytest.raises(ValueError, match="undeclared_key: empty"):
        MixSpec(count=1, undeclared_share=0.5)
