"""``lake_formation_permissions``: off by default, no Lake Formation
resource; on (a test context, not the shipped cdk.json), the job role and each
table optimizer role get their database and table permissions through
``AWS::LakeFormation::PrincipalPermissions``, each created after what it
names, and the templates stay clean for cdk-nag and cfn-lint.
https://docs.aws.amazon.com/lake-formation/latest/dg/lf-permissions-reference.html
https://docs.aws.amazon.com/glue/latest/dg/optimization-prerequisites.html"""

from __future__ import annotations

from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from infra.config import read_cdk_context
from infra.constructs.catalog import (
    DATABASE_LOGICAL_ID,
    JOB_LAKE_FORMATION_DATABASE_PERMISSIONS,
    JOB_LAKE_FORMATION_TABLE_PERMISSIONS,
)
from infra.table_definition import (
    EVENTS_TABLE_LOGICAL_ID,
    OPTIMIZER_LAKE_FORMATION_PERMISSIONS,
)
from tests.infra.conftest import EXAMPLE_CDK_JSON, Synthesized

pytestmark = pytest.mark.synth

LF_STACK = "Streaming-orders-eu-west-1"
GRANT = "AWS::LakeFormation::PrincipalPermissions"


def _types(synth: Synthesized) -> set[str]:
    return {r["Type"] for t in synth.templates.values() for r in t["Resources"].values()}


def _depends_on(resource: dict[str, Any]) -> set[str]:
    value = resource.get("DependsOn", [])
    return {value} if isinstance(value, str) else set(value)


def test_off_by_default_and_in_the_shipped_example(
    synthesized: Synthesized, synthesized_existing: Synthesized
) -> None:
    for instance in read_cdk_context(EXAMPLE_CDK_JSON)["streaming"]["instances"]:
        assert "lake_formation_permissions" not in instance
    for synth in (synthesized, synthesized_existing):
        assert all(not c.lake_formation_permissions for c in map(synth.config, synth.stacks))
        assert not {t for t in _types(synth) if t.startswith("AWS::LakeFormation::")}


def test_on_grants_the_job_role_its_database_and_table(
    synthesized_lake_formation: Synthesized,
) -> None:
    synth = synthesized_lake_formation
    assert synth.config(LF_STACK).lake_formation_permissions
    resources = synth.templates[LF_STACK]["Resources"]
    job_role = synth.role_assumed_by(LF_STACK, "ec2.amazonaws.com")
    database = resources[DATABASE_LOGICAL_ID]["Properties"]["DatabaseInput"]["Name"]
    table = resources[EVENTS_TABLE_LOGICAL_ID]["Properties"]["TableInput"]["Name"]
    job_grants = {
        logical_id: r
        for logical_id, r in synth.resources(LF_STACK, GRANT).items()
        if r["Properties"]["Principal"]["DataLakePrincipalIdentifier"]
        == {"Fn::GetAtt": [job_role, "Arn"]}
    }
    by_resource = {
        next(iter(r["Properties"]["Resource"])): (logical_id, r)
        for logical_id, r in job_grants.items()
    }
    assert set(by_resource) == {"Database", "Table"} and len(job_grants) == 2
    database_id, database_grant = by_resource["Database"]
    assert database_grant["Properties"]["Resource"]["Database"] == {
        "CatalogId": {"Ref": "AWS::AccountId"},
        "Name": database,
    }
    assert database_grant["Properties"]["Permissions"] == list(
        JOB_LAKE_FORMATION_DATABASE_PERMISSIONS
    )
    assert DATABASE_LOGICAL_ID in _depends_on(database_grant), database_id
    table_id, table_grant = by_resource["Table"]
    assert table_grant["Properties"]["Resource"]["Table"] == {
        "CatalogId": {"Ref": "AWS::AccountId"},
        "DatabaseName": database,
        "Name": table,
    }
    assert sorted(table_grant["Properties"]["Permissions"]) == sorted(
        ("ALTER", "DELETE", "DESCRIBE", "INSERT", "SELECT")
    )
    assert tuple(table_grant["Properties"]["Permissions"]) == JOB_LAKE_FORMATION_TABLE_PERMISSIONS
    assert EVENTS_TABLE_LOGICAL_ID in _depends_on(table_grant), table_id


def test_on_grants_each_optimizer_role_its_table_and_the_optimizer_waits(
    synthesized_lake_formation: Synthesized,
) -> None:
    synth = synthesized_lake_formation
    resources = synth.templates[LF_STACK]["Resources"]
    database = resources[DATABASE_LOGICAL_ID]["Properties"]["DatabaseInput"]["Name"]
    grants_by_role = {
        r["Properties"]["Principal"]["DataLakePrincipalIdentifier"]["Fn::GetAtt"][0]: (
            logical_id,
            r["Properties"],
        )
        for logical_id, r in synth.resources(LF_STACK, GRANT).items()
    }
    optimizers = synth.resources(LF_STACK, "AWS::Glue::TableOptimizer")
    assert len(optimizers) == 3
    for optimizer in optimizers.values():
        kind = optimizer["Properties"]["Type"]
        role = optimizer["Properties"]["TableOptimizerConfiguration"]["RoleArn"]["Fn::GetAtt"][0]
        grant_id, grant = grants_by_role[role]
        assert grant["Resource"] == {
            "Table": {
                "CatalogId": {"Ref": "AWS::AccountId"},
                "DatabaseName": database,
                "Name": optimizer["Properties"]["TableName"],
            }
        }
        assert tuple(grant["Permissions"]) == OPTIMIZER_LAKE_FORMATION_PERMISSIONS[kind]
        assert EVENTS_TABLE_LOGICAL_ID in _depends_on(resources[grant_id])
        assert grant_id in _depends_on(optimizer)
    # The orphan-file optimizer neither commits (ALTER) nor writes files (INSERT).
    assert OPTIMIZER_LAKE_FORMATION_PERMISSIONS["orphan_file_deletion"] == ("DELETE", "DESCRIBE")
    # The job role's two and one per optimizer, nothing else.
    assert len(grants_by_role) == 4 and len(synth.resources(LF_STACK, GRANT)) == 5


def test_on_grants_nothing_grantable_and_only_in_this_account(
    synthesized_lake_formation: Synthesized,
) -> None:
    grants = synthesized_lake_formation.resources(LF_STACK, GRANT)
    assert len(grants) == 5  # the job role's two, one per optimizer
    for grant in grants.values():
        properties = grant["Properties"]
        assert properties["PermissionsWithGrantOption"] == []
        assert properties["Catalog"] == {"Ref": "AWS::AccountId"}
        assert set(properties["Resource"]) <= {"Database", "Table"}  # no data location


def test_on_passes_cdk_nag_and_cfn_lint(synthesized_lake_formation: Synthesized) -> None:
    synth = synthesized_lake_formation
    assert synth.error is None
    assert synth.report is not None and synth.report["pluginReports"] == []
    matches = lint_file(
        synth.template_paths[LF_STACK], config=ManualArgs(regions=[synth.config(LF_STACK).region])
    )
    found = [f"{m.rule.id} {m.message} ({m.path})" for m in matches if m.rule.id[0] in "EFW"]
    assert found == []
