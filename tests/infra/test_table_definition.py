"""infra/table_definition.py: the events table's definition without CDK.

The fingerprint, the pins and check_definition's refusal are tested in
tests/infra/constructs/test_events_table.py (beside the synthesized table they pin);
here: that the module stands alone (synth-free tools and scripts import it)
and the optimizer roles' actions it derives."""

from __future__ import annotations

from infra.constructs.buckets import Buckets
from infra.table_definition import (
    OPTIMIZER_LAKE_FORMATION_PERMISSIONS,
    OPTIMIZER_TYPES,
    database_prefix,
    definition_fingerprint,
    optimizer_object_actions,
    optimizer_table_actions,
    optimizer_writes,
    pinned_seed_fields,
)
from model.config import EventField
from tests.child_process import probe

CDK = ("aws_cdk", "constructs", "cdk_nag", "jsii")
FINGERPRINT = """
from model.config import DEFAULT_EVENT_FIELDS
from infra.table_definition import definition_fingerprint
print(definition_fingerprint(DEFAULT_EVENT_FIELDS, "db", "warehouse/db.db/"))
"""


def test_the_definition_imports_without_cdk() -> None:
    """No aws_cdk, constructs or jsii: the fingerprint is computed with CDK blocked."""
    fingerprint = probe(FINGERPRINT, blocked=CDK, timeout=120).strip()
    assert len(fingerprint) == 64
    assert set(fingerprint) <= set("0123456789abcdef")


def test_only_orphan_file_deletion_leaves_the_table_unwritten() -> None:
    assert [kind for kind in OPTIMIZER_TYPES if not optimizer_writes(kind)] == [
        "orphan_file_deletion"
    ]
    assert optimizer_object_actions("orphan_file_deletion") == ["s3:GetObject", "s3:DeleteObject"]
    assert optimizer_table_actions("orphan_file_deletion") == ["glue:GetTable"]
    for kind in ("compaction", "retention"):
        assert optimizer_object_actions(kind) == [
            "s3:GetObject",
            "s3:DeleteObject",
            "s3:PutObject",
        ]
        assert optimizer_table_actions(kind) == ["glue:GetTable", "glue:UpdateTable"]


def test_lake_formation_permissions_follow_what_each_optimizer_does() -> None:
    """ALTER pairs with glue:UpdateTable, INSERT with s3:PutObject: the
    Lake Formation grant says no more than the IAM policy."""
    for kind in OPTIMIZER_TYPES:
        permissions = set(OPTIMIZER_LAKE_FORMATION_PERMISSIONS[kind])
        assert ("ALTER" in permissions) == ("glue:UpdateTable" in optimizer_table_actions(kind))
        assert ("INSERT" in permissions) == ("s3:PutObject" in optimizer_object_actions(kind))
        assert {"DELETE", "DESCRIBE"} <= permissions


def test_the_warehouse_prefix_is_the_data_buckets() -> None:
    assert database_prefix("streaming_orders_eu_west_1") == Buckets.database_prefix(
        "streaming_orders_eu_west_1"
    )


def test_a_pin_gives_back_the_fields_its_table_was_created_with() -> None:
    """Optional fields appended (or inserted) after the pin
    are found out; a widened type is not (it needs table_seed)."""

    created = (
        EventField("paymentId"),
        EventField("authorizedAt", "timestamp"),
        EventField("amount", "int"),
        EventField("note", required=False),
    )
    pin = definition_fingerprint(created, "db", database_prefix("db"))
    grown = (*created[:2], EventField("channel", required=False), *created[2:])
    grown += (EventField("tier", required=False),)
    assert pinned_seed_fields(grown, pin, "db") == created
    assert pinned_seed_fields(created, pin, "db") == created
    widened = (*created[:2], EventField("amount", "long"), created[3])
    assert pinned_seed_fields(widened, pin, "db") is None
