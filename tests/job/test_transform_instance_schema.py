"""The job checks records against its own instance's fields.

Two instances of tests/fixtures/cdk_schemas.json: orders (the default
fields) and payments (its own). Each job's config is built by the stack's own
function (``job_config_for``), then a batch goes through what the job runs on
every micro-batch (:func:`job.micro_batch.prepare`: classify, de-duplicate).
"""

from __future__ import annotations

import json
from typing import Any

from infra.config import InstanceConfig, load_instances, read_cdk_context
from infra.job_config import job_config_for
from job.micro_batch import prepare
from job.transform import failures
from model.config import RESERVED_COLUMNS, JobConfig
from model.record import ERROR_CLASS, MESSAGE, REASON, SOURCE_COLUMNS, UNDECLARED_KEYS
from tests.fixtures import SCHEMAS_CDK_JSON
from tests.job.job_helpers import raw_frame, table_rows

AT = "2026-01-02T03:04:05.123456789+09:00"
# Valid for payments only: no ``id``/``occurredAt``/``type``/``payload``.
PAYMENT = {
    "paymentId": "pay-1",
    "status": "captured",
    "amountMinor": 1999,
    "currency": "KRW",
    "authorizedAt": AT,
    "refunded": False,
    "tags": ["web"],
    "fxRate": 0.00072,
}
# Valid for orders only.
ORDER = {"id": "ord-1", "type": "created", "occurredAt": AT, "payload": {"n": 1}}


def _instances() -> dict[str, InstanceConfig]:
    return {i.domain: i for i in load_instances(read_cdk_context(SCHEMAS_CDK_JSON))}


def _config(domain: str) -> JobConfig:
    return job_config_for(
        _instances()[domain],
        checkpoint_location="/tmp/unused-checkpoint",
        kafka_bootstrap_servers="127.0.0.1:9",
        kafka_security="PLAINTEXT",
    )


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def _batch(spark: Any, config: JobConfig, records: list[bytes]) -> tuple[list[Any], list[Any]]:
    """(valid rows, failure rows) of one batch as the job prepares it."""
    prepared = prepare(raw_frame(spark, records), config).cache()
    rows = table_rows(prepared, fields=config.event_fields, batch_id=0).collect()
    failed = failures(prepared).orderBy("sequenceNumber").collect()
    return rows, failed


def test_payments_job_accepts_a_payment_and_fails_an_order_naming_its_id_field(
    spark: Any,
) -> None:
    config = _config("payments")
    rows, failed = _batch(spark, config, [_encode(PAYMENT), _encode(ORDER)])
    assert [r["payment_id"] for r in rows] == ["pay-1"]
    (row,) = rows
    assert row["amount_minor"] == 1999
    assert row["authorized_at_raw"] == AT
    assert row["captured_at"] is None, "an optional field may be absent"
    assert json.loads(row["tags"]) == ["web"]
    assert row["fx_rate"] == 0.00072
    (failure,) = failed
    assert failure[REASON] == "missing_field"
    assert failure[MESSAGE] == "required field 'paymentId' is absent or null"
    assert failure[ERROR_CLASS] == "MissingFieldError"
    assert json.loads(failure["data"]) == ORDER


def test_orders_job_fails_a_payment_naming_its_own_id_field(spark: Any) -> None:
    config = _config("orders")
    rows, failed = _batch(spark, config, [_encode(ORDER), _encode(PAYMENT)])
    assert [r["id"] for r in rows] == ["ord-1"]
    assert [(f[REASON], f[MESSAGE]) for f in failed] == [
        ("missing_field", "required field 'id' is absent or null")
    ]


def test_payments_types_and_event_time_are_its_own(spark: Any) -> None:
    """A payment with a string amount, and one whose event time is not a
    timestamp: the reasons name payments' fields."""
    config = _config("payments")
    records = [
        _encode({**PAYMENT, "paymentId": "pay-2", "amountMinor": "19.99"}),
        _encode({**PAYMENT, "paymentId": "pay-3", "authorizedAt": "yesterday"}),
        _encode({**PAYMENT, "paymentId": "pay-4", "refunded": "no"}),
    ]
    rows, failed = _batch(spark, config, records)
    assert rows == []
    assert [(f[REASON], f[MESSAGE]) for f in failed] == [
        ("wrong_type", "field 'amountMinor' must be a JSON long"),
        (
            "bad_timestamp",
            "field 'authorizedAt' is not an ISO-8601 timestamp "
            "(yyyy-MM-ddTHH:mm:ss[.fffffffff][Z|+hh:mm])",
        ),
        ("wrong_type", "field 'refunded' must be a JSON boolean"),
    ]


def test_payments_duplicates_are_told_by_its_id_field(spark: Any) -> None:
    config = _config("payments")
    again = {**PAYMENT, "status": "settled"}  # the same paymentId re-sent
    rows, failed = _batch(spark, config, [_encode(PAYMENT), _encode(again)])
    assert [r["payment_id"] for r in rows] == ["pay-1"]
    assert failed == []


def test_reserved_columns_cover_the_jobs_own_frames() -> None:
    """model.config derives its reserved names from the record vocabulary; the
    frames the job builds (the Spark source schema, the classification) must
    hold no column beyond them."""
    assert {c.lower() for c in SOURCE_COLUMNS} <= RESERVED_COLUMNS
    assert {REASON, MESSAGE, ERROR_CLASS, UNDECLARED_KEYS} <= RESERVED_COLUMNS
