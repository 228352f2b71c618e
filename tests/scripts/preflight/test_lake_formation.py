"""scripts.preflight.lake_formation: IAM-only catalogs pass, governed ones need the option."""

from __future__ import annotations

from typing import Any

import boto3
from moto import mock_aws

from infra.config import InstanceConfig
from scripts.preflight import lake_formation
from scripts.preflight.result import Result
from tests.scripts.preflight.stubs import IAM_ONLY, Stub, _access_denied, _config

# ------------------------------------------------------------------ Lake Formation


def _put_settings(database_defaults: Any, table_defaults: Any) -> None:
    boto3.client("lakeformation", region_name="eu-west-1").put_data_lake_settings(
        DataLakeSettings={
            "DataLakeAdmins": [],
            "CreateDatabaseDefaultPermissions": database_defaults,
            "CreateTableDefaultPermissions": table_defaults,
        }
    )


def _lake_formation(config: InstanceConfig) -> Result:
    clients = {
        "lakeformation": boto3.client("lakeformation", region_name="eu-west-1"),
        "glue": boto3.client("glue", region_name="eu-west-1"),
    }
    return lake_formation.check_lake_formation(config, clients)


@mock_aws
def test_an_iam_only_catalog_passes() -> None:
    _put_settings(IAM_ONLY, IAM_ONLY)
    result = _lake_formation(_config())
    assert result.status == "PASS" and "IAM alone controls" in result.detail


@mock_aws
def test_a_catalog_lake_formation_governs_fails_until_the_option_is_on() -> None:
    _put_settings([], [])
    result = _lake_formation(_config())
    assert result.status == "FAIL"
    assert "Lake Formation governs new databases, new tables" in result.detail
    assert result.fix == (
        'set "lake_formation_permissions": true in the orders-eu-west-1 entry of cdk.json'
    )
    on = _lake_formation(_config(lake_formation_permissions=True))
    assert on.status == "PASS" and "lake_formation_permissions is on" in on.detail


@mock_aws
def test_an_existing_database_without_iam_only_defaults_is_governed() -> None:
    _put_settings(IAM_ONLY, IAM_ONLY)
    config = _config()
    glue = boto3.client("glue", region_name="eu-west-1")
    glue.create_database(
        DatabaseInput={"Name": config.database_name, "CreateTableDefaultPermissions": []}
    )
    result = _lake_formation(config)
    assert result.status == "FAIL"
    assert f"Lake Formation governs new tables in {config.database_name}" in result.detail


def test_governance_is_read_from_both_defaults() -> None:
    assert lake_formation.lake_formation_governs({}, None) == ["new databases", "new tables"]
    half = {"CreateDatabaseDefaultPermissions": IAM_ONLY, "CreateTableDefaultPermissions": []}
    assert lake_formation.lake_formation_governs(half, None) == ["new tables"]
    select_only = [{**IAM_ONLY[0], "Permissions": ["SELECT"]}]
    both = {"CreateDatabaseDefaultPermissions": IAM_ONLY, "CreateTableDefaultPermissions": IAM_ONLY}
    assert lake_formation.lake_formation_governs(both, {"Name": "db"}) == []  # no field: no opinion
    assert lake_formation.lake_formation_governs(
        both, {"Name": "db", "CreateTableDefaultPermissions": select_only}
    ) == ["new tables in db"]


def test_access_denied_on_the_settings_is_a_clear_fail() -> None:
    clients = {"lakeformation": Stub(get_data_lake_settings=_access_denied("GetDataLakeSettings"))}
    result = lake_formation.check_lake_formation(_config(), clients)
    assert result.status == "FAIL"
    assert "refused (access denied)" in result.detail and "is unknown" in result.detail
    assert "lakeformation:GetDataLakeSettings" in result.fix
    assert '"lake_formation_permissions": true' in result.fix
