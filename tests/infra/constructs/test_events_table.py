"""The events table (Apache Iceberg, in the instance's own Glue database), its
Glue table optimizers and their roles, and the job role's catalog grants.

Synth tests read the shipped example (one synth per session); the unit tests
build the catalog construct in a bare stack to show what a change of settings
or of the event schema does to the table resource.
"""

from __future__ import annotations

import math
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from infra.constructs.buckets import DATA_BUCKET_LOGICAL_ID
from infra.constructs.catalog import (
    DATABASE_LOGICAL_ID,
    HIVE_DEFAULT_DATABASE,
    CatalogDatabase,
    CatalogDatabaseProps,
)
from infra.job_config import job_config_for
from infra.table_definition import (
    DEPLOYED_DEFINITION_SHA256,
    EVENTS_TABLE_LOGICAL_ID,
    OPTIMIZER_LOG_GROUPS,
    OPTIMIZER_LOGICAL_IDS,
    OPTIMIZER_TYPES,
    TableDefinitionChangedError,
    check_definition,
    definition_fingerprint,
    retention_days,
    table_definition,
)
from model import contract
from model.config import DEFAULT_EVENT_FIELDS, EventField, TableMaintenance
from model.table_layout import evolved_columns, seed_columns, table_columns
from tests.infra.conftest import Synthesized
from tests.infra.conftest import glue_arn as _glue_arn

ORDERS_AP = "Streaming-orders-ap-northeast-2"
PAYMENTS_AP = "Streaming-payments-ap-northeast-2"
ORDERS_EU = "Streaming-orders-eu-west-1"
ALL = (ORDERS_AP, PAYMENTS_AP, ORDERS_EU)

PARTITION_ACTIONS = {
    "glue:CreatePartition",
    "glue:BatchCreatePartition",
    "glue:UpdatePartition",
    "glue:BatchUpdatePartition",
    "glue:DeletePartition",
    "glue:BatchDeletePartition",
}


# ------------------------------------------------------------------ helpers


def _table_prefix(database: str) -> str:
    return f"warehouse/{database}.db/{contract.EVENTS_TABLE}"


def _location(database: str) -> dict[str, Any]:
    return {
        "Fn::Join": ["", ["s3://", {"Ref": DATA_BUCKET_LOGICAL_ID}, f"/{_table_prefix(database)}"]]
    }


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _job_fields(synth: Synthesized, name: str) -> tuple[EventField, ...]:
    """The event fields the deployed job runs with: the stack's own path to its
    job config (``job_config_for``), with placeholders for what it derives."""
    job = job_config_for(
        synth.config(name),
        checkpoint_location="s3://bucket/checkpoints/",
        kafka_cluster_arn="arn:aws:kafka:eu-west-1:123456789012:cluster/c/0",
    )
    return tuple(job.event_fields)


def _job_role_glue_statements(synth: Synthesized, name: str) -> list[dict[str, Any]]:
    job_role = synth.role_assumed_by(name, "ec2.amazonaws.com")
    statements = synth.policy_statements(name, job_role)
    return [s for s in statements if any(a.startswith("glue:") for a in _as_list(s["Action"]))]


def _bare_catalog(
    *,
    fields: tuple[EventField, ...] = DEFAULT_EVENT_FIELDS,
    maintenance: TableMaintenance | None = None,
    removal: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
) -> dict[str, Any]:
    """The catalog construct alone in a bare stack, as a template."""
    app = cdk.App()
    stack = cdk.Stack(app, "Bare", env=cdk.Environment(region="eu-west-1"))
    bucket = s3.Bucket(stack, "Data")
    cfn_bucket = bucket.node.default_child
    assert isinstance(cfn_bucket, s3.CfnBucket)
    cfn_bucket.override_logical_id(DATA_BUCKET_LOGICAL_ID)
    catalog = CatalogDatabase(
        stack,
        "Catalog",
        props=CatalogDatabaseProps(
            database_name="streaming_unit_eu_west_1",
            bucket=bucket,
            database_prefix="warehouse/streaming_unit_eu_west_1.db/",
            fields=fields,
            maintenance=maintenance or TableMaintenance(),
            removal_policy=removal,
        ),
    )
    catalog.grant_job(iam.Role(stack, "Job", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com")))
    template: dict[str, Any] = Template.from_stack(stack).to_json()
    return template


# ------------------------------------------------------------------ the table (synth)


@pytest.mark.parametrize("name", ALL)
def test_each_instance_has_its_events_table_in_iceberg_format(
    synthesized: Synthesized, name: str
) -> None:
    config = synthesized.config(name)
    table = synthesized.templates[name]["Resources"][EVENTS_TABLE_LOGICAL_ID]
    assert table["Type"] == "AWS::Glue::Table"
    props = table["Properties"]
    assert props["CatalogId"] == {"Ref": "AWS::AccountId"}
    assert props["DatabaseName"] == config.database_name
    assert props["TableInput"]["Name"] == contract.EVENTS_TABLE
    assert props["TableInput"]["TableType"] == "EXTERNAL_TABLE"
    assert props["OpenTableFormatInput"] == {
        "IcebergInput": {"MetadataOperation": "CREATE", "Version": "2"}
    }
    # Under the database's location, as pyiceberg would place it.
    assert props["TableInput"]["StorageDescriptor"]["Location"] == _location(config.database_name)
    # No partition spec in CloudFormation (docs/infra.md): no Hive partition keys either.
    assert "PartitionKeys" not in props["TableInput"]
    assert "IcebergTableInput" not in props["OpenTableFormatInput"]["IcebergInput"]
    # The database is named by a literal: the dependency must be explicit.
    assert DATABASE_LOGICAL_ID in _as_list(table["DependsOn"])
    assert len(synthesized.resources(name, "AWS::Glue::Table")) == 1


@pytest.mark.parametrize(("name", "policy"), [(ORDERS_AP, "Retain"), (ORDERS_EU, "Delete")])
def test_events_table_follows_the_removal_policy(
    synthesized: Synthesized, name: str, policy: str
) -> None:
    table = synthesized.templates[name]["Resources"][EVENTS_TABLE_LOGICAL_ID]
    assert table["DeletionPolicy"] == policy
    assert table["UpdateReplacePolicy"] == policy


@pytest.mark.parametrize("name", ALL)
def test_columns_are_the_jobs_seed_columns_the_job_adds_the_rest(
    synthesized: Synthesized, name: str
) -> None:
    """The definition stays what every deployed table was created with; the
    columns added since (sub_sequence_number) come from the job at start
    (job.table.evolution), appended after these."""
    columns = synthesized.templates[name]["Resources"][EVENTS_TABLE_LOGICAL_ID]["Properties"][
        "TableInput"
    ]["StorageDescriptor"]["Columns"]
    fields = _job_fields(synthesized, name)
    expected = [{"Name": c.name, "Type": c.glue_type} for c in seed_columns(fields)]
    assert columns == expected
    assert [c["Name"] for c in columns][:3] == ["id", "type", "occurred_at"]
    assert [c.name for c in table_columns(fields)] == [
        *(c["Name"] for c in columns),
        *(c.name for c in evolved_columns()),
    ]
    assert "sub_sequence_number" not in {c["Name"] for c in columns}


@pytest.mark.parametrize("name", ALL)
def test_table_resource_is_exactly_the_pinned_definition(
    synthesized: Synthesized, name: str
) -> None:
    """What is deployed is what the fingerprint covers, and the fingerprint is
    the pinned one: a template that would update the live table cannot pass."""
    config = synthesized.config(name)
    props = dict(synthesized.templates[name]["Resources"][EVENTS_TABLE_LOGICAL_ID]["Properties"])
    assert props.pop("CatalogId") == {"Ref": "AWS::AccountId"}
    assert props.pop("DatabaseName") == config.database_name
    fields = _job_fields(synthesized, name)
    assert props == table_definition(fields, _location(config.database_name))
    prefix = f"warehouse/{config.database_name}.db/"
    assert definition_fingerprint(fields, config.database_name, prefix) == (
        DEPLOYED_DEFINITION_SHA256
    )


def test_no_stack_creates_the_shared_default_database(synthesized: Synthesized) -> None:
    """``default`` is shared by every instance of an account and region: a
    stack that created it would fail next to another instance's stack."""
    for name in ALL:
        databases = synthesized.resources(name, "AWS::Glue::Database")
        assert list(databases) == [DATABASE_LOGICAL_ID]
        (database,) = databases.values()
        assert database["Properties"]["DatabaseInput"]["Name"] != HIVE_DEFAULT_DATABASE


# ------------------------------------------------------------------ optimizers (synth)


def _optimizers(synth: Synthesized, name: str) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["Type"]: {"logical_id": lid, **r}
        for lid, r in synth.resources(name, "AWS::Glue::TableOptimizer").items()
    }


@pytest.mark.parametrize("name", ALL)
def test_three_optimizers_on_the_table_each_with_its_own_role(
    synthesized: Synthesized, name: str
) -> None:
    config = synthesized.config(name)
    resources = synthesized.templates[name]["Resources"]
    optimizers = _optimizers(synthesized, name)
    assert config.job.table_maintenance.compaction
    assert set(optimizers) == set(OPTIMIZER_TYPES)
    roles = set()
    for kind, optimizer in optimizers.items():
        assert optimizer["logical_id"] == OPTIMIZER_LOGICAL_IDS[kind]
        props = optimizer["Properties"]
        assert props["CatalogId"] == {"Ref": "AWS::AccountId"}
        assert props["DatabaseName"] == config.database_name
        assert props["TableName"] == contract.EVENTS_TABLE
        # Created after the table (named by a literal, so only DependsOn orders them).
        assert EVENTS_TABLE_LOGICAL_ID in _as_list(optimizer["DependsOn"])
        configuration = props["TableOptimizerConfiguration"]
        assert configuration["Enabled"] is True
        role_id, attribute = configuration["RoleArn"]["Fn::GetAtt"]
        assert attribute == "Arn"
        role = resources[role_id]
        assert role["Type"] == "AWS::IAM::Role"
        assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
            {
                "Action": "sts:AssumeRole",
                "Effect": "Allow",
                "Principal": {"Service": "glue.amazonaws.com"},
                # Only for this account's Glue (whenever Glue names its source).
                "Condition": {
                    "StringEqualsIfExists": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                    "ArnLikeIfExists": {"aws:SourceArn": _glue_arn(":*")},
                },
            }
        ]
        assert "ManagedPolicyArns" not in role["Properties"]
        roles.add(role_id)
    assert len(roles) == 3
    # No other policy is attached to the optimizer roles.
    for policy in synthesized.resources(name, "AWS::IAM::Policy").values():
        assert not {r["Ref"] for r in policy["Properties"]["Roles"]} & roles


@pytest.mark.parametrize("name", ALL)
def test_optimizer_settings_are_the_jobs_table_maintenance(
    synthesized: Synthesized, name: str
) -> None:
    config = synthesized.config(name)
    maintenance = config.job.table_maintenance
    optimizers = _optimizers(synthesized, name)
    retention = optimizers["retention"]["Properties"]["TableOptimizerConfiguration"]
    assert retention["RetentionConfiguration"] == {
        "IcebergConfiguration": {
            "SnapshotRetentionPeriodInDays": math.ceil(maintenance.snapshot_retention_hours / 24),
            "NumberOfSnapshotsToRetain": maintenance.snapshots_to_retain,
            "CleanExpiredFiles": True,
        }
    }
    orphans = optimizers["orphan_file_deletion"]["Properties"]["TableOptimizerConfiguration"]
    assert orphans["OrphanFileDeletionConfiguration"] == {
        "IcebergConfiguration": {
            "Location": _location(config.database_name),
            "OrphanFileRetentionPeriodInDays": maintenance.orphan_file_retention_days,
        }
    }
    compaction = optimizers["compaction"]["Properties"]["TableOptimizerConfiguration"]
    assert set(compaction) == {"Enabled", "RoleArn"}


def _inline_statements(role: dict[str, Any]) -> list[dict[str, Any]]:
    (policy,) = role["Properties"]["Policies"]
    statements: list[dict[str, Any]] = policy["PolicyDocument"]["Statement"]
    return statements


@pytest.mark.parametrize("name", ALL)
def test_optimizer_roles_reach_this_table_only(synthesized: Synthesized, name: str) -> None:
    database = synthesized.config(name).database_name
    resources = synthesized.templates[name]["Resources"]
    prefix = _table_prefix(database)
    for kind, optimizer in _optimizers(synthesized, name).items():
        role_id = optimizer["Properties"]["TableOptimizerConfiguration"]["RoleArn"]["Fn::GetAtt"][0]
        writes = kind != "orphan_file_deletion"
        by_sid = {s["Sid"]: s for s in _inline_statements(resources[role_id])}
        assert set(by_sid) == {"TableObjects", "TableListing", "TableMetadata", "OptimizerLogs"}
        for statement in by_sid.values():
            assert statement["Effect"] == "Allow"
        objects = by_sid["TableObjects"]
        assert set(_as_list(objects["Action"])) == {"s3:GetObject", "s3:DeleteObject"} | (
            {"s3:PutObject"} if writes else set()
        )
        assert objects["Resource"] == {
            "Fn::Join": ["", [{"Fn::GetAtt": [DATA_BUCKET_LOGICAL_ID, "Arn"]}, f"/{prefix}/*"]]
        }
        listing = by_sid["TableListing"]
        assert listing["Action"] == "s3:ListBucket"
        assert listing["Resource"] == {"Fn::GetAtt": [DATA_BUCKET_LOGICAL_ID, "Arn"]}
        assert listing["Condition"] == {"StringLike": {"s3:prefix": [prefix, f"{prefix}/*"]}}
        metadata = by_sid["TableMetadata"]
        assert set(_as_list(metadata["Action"])) == {"glue:GetTable"} | (
            {"glue:UpdateTable"} if writes else set()
        )
        assert metadata["Resource"] == [
            _glue_arn(":catalog"),
            _glue_arn(f":database/{database}"),
            _glue_arn(f":table/{database}/{contract.EVENTS_TABLE}"),
        ]
        logs = by_sid["OptimizerLogs"]
        assert set(_as_list(logs["Action"])) == {
            "logs:CreateLogGroup",
            "logs:CreateLogStream",
            "logs:PutLogEvents",
        }
        assert logs["Resource"]["Fn::Join"][1][-1] == f":log-group:{OPTIMIZER_LOG_GROUPS[kind]}:*"


# ------------------------------------------------------------------ the job role (synth)


@pytest.mark.parametrize("name", ALL)
def test_job_role_reads_and_commits_its_events_table_only(
    synthesized: Synthesized, name: str
) -> None:
    database = synthesized.config(name).database_name
    by_sid = {s["Sid"]: s for s in _job_role_glue_statements(synthesized, name)}
    assert set(by_sid) == {"OwnGlueDatabase", "OwnEventsTable", "DefaultDatabase"}
    assert by_sid["OwnGlueDatabase"]["Action"] == "glue:GetDatabase"
    assert by_sid["OwnGlueDatabase"]["Resource"] == [
        _glue_arn(":catalog"),
        _glue_arn(f":database/{database}"),
    ]
    assert set(_as_list(by_sid["OwnEventsTable"]["Action"])) == {
        "glue:GetTable",
        "glue:UpdateTable",
    }
    assert by_sid["OwnEventsTable"]["Resource"] == [
        _glue_arn(":catalog"),
        _glue_arn(f":database/{database}"),
        _glue_arn(f":table/{database}/{contract.EVENTS_TABLE}"),
    ]
    every_action = {a for s in by_sid.values() for a in _as_list(s["Action"])}
    assert not every_action & (PARTITION_ACTIONS | {"glue:CreateTable", "glue:DeleteTable"})


@pytest.mark.parametrize("name", ALL)
def test_job_role_may_create_the_default_database_and_no_other(
    synthesized: Synthesized, name: str
) -> None:
    """The Hive client creates ``default`` at start when the account has none;
    without CreateDatabase the job fails with AccessDenied there."""
    statements = _job_role_glue_statements(synthesized, name)
    creating = [s for s in statements if "glue:CreateDatabase" in _as_list(s["Action"])]
    assert len(creating) == 1
    assert set(_as_list(creating[0]["Action"])) == {"glue:GetDatabase", "glue:CreateDatabase"}
    assert creating[0]["Resource"] == [
        _glue_arn(":catalog"),
        _glue_arn(f":database/{HIVE_DEFAULT_DATABASE}"),
    ]


# ------------------------------------------------------------------ unit: the update trap


def test_the_pinned_definition_is_the_default_event_schema() -> None:
    check_definition(
        DEFAULT_EVENT_FIELDS, "streaming_x_eu_west_1", "warehouse/streaming_x_eu_west_1.db/"
    )


def test_fingerprint_names_no_instance() -> None:
    a = definition_fingerprint(
        DEFAULT_EVENT_FIELDS, "streaming_a_eu_west_1", "warehouse/streaming_a_eu_west_1.db/"
    )
    b = definition_fingerprint(
        DEFAULT_EVENT_FIELDS,
        "streaming_b_ap_northeast_2",
        "warehouse/streaming_b_ap_northeast_2.db/",
    )
    assert a == b == DEPLOYED_DEFINITION_SHA256


@pytest.mark.parametrize(
    ("fields", "prefix"),
    [
        ((*DEFAULT_EVENT_FIELDS, EventField("channel", "string", required=False)), None),
        (tuple(f for f in DEFAULT_EVENT_FIELDS if f.name != "payload"), None),
        (DEFAULT_EVENT_FIELDS, "tables/streaming_unit_eu_west_1.db/"),
    ],
    ids=["added-field", "removed-field", "moved-location"],
)
def test_a_changed_table_definition_stops_the_synth(
    fields: tuple[EventField, ...], prefix: str | None
) -> None:
    database = "streaming_unit_eu_west_1"
    with pytest.raises(TableDefinitionChangedError, match=r"docs/infra\.md") as raised:
        check_definition(fields, database, prefix or f"warehouse/{database}.db/")
    assert "metadata_location" in str(raised.value)
    if prefix is None:
        with pytest.raises(TableDefinitionChangedError):
            _bare_catalog(fields=fields)


def test_ordinary_setting_changes_leave_the_table_resource_untouched() -> None:
    """CloudFormation only updates a resource whose template changed: every
    setting an ordinary deploy may change (maintenance numbers, compaction on or
    off, the removal policy) must leave the table's properties identical."""
    baseline = _bare_catalog()
    variants = [
        _bare_catalog(
            maintenance=TableMaintenance(
                snapshot_retention_hours=72,
                snapshots_to_retain=5,
                orphan_file_retention_days=10,
                metadata_versions_kept=3,
                compaction=False,
            )
        ),
        _bare_catalog(removal=cdk.RemovalPolicy.DESTROY),
    ]
    table = baseline["Resources"][EVENTS_TABLE_LOGICAL_ID]
    for variant in variants:
        changed = variant["Resources"][EVENTS_TABLE_LOGICAL_ID]
        assert changed["Properties"] == table["Properties"]
        assert changed.get("DependsOn") == table.get("DependsOn")
    # ... while the optimizers do follow the settings.
    assert (
        variants[0]["Resources"]["EventsTableRetention"]
        != baseline["Resources"]["EventsTableRetention"]
    )


def test_compaction_off_means_no_compaction_optimizer_and_no_role() -> None:
    template = _bare_catalog(maintenance=TableMaintenance(compaction=False))
    types = {
        r["Properties"]["Type"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Glue::TableOptimizer"
    }
    assert types == {"retention", "orphan_file_deletion"}
    glue_roles = [
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Role"
        and r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "glue.amazonaws.com"}
    ]
    assert len(glue_roles) == 2


@pytest.mark.parametrize(("hours", "days"), [(1, 1), (24, 1), (25, 2), (48, 2), (168, 7)])
def test_retention_days_never_keep_less_than_the_job(hours: int, days: int) -> None:
    assert retention_days(hours) == days
    assert retention_days(hours) * 24 >= hours
