"""Whether Lake Formation governs the databases and tables the stack creates,
and if so that the instance sets ``lake_formation_permissions``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from infra.config import InstanceConfig
from scripts.preflight.result import Clients, Result, access_denied, error_text, iam_fix

# Lake Formation governs a new database or table unless the data lake's
# CreateDatabaseDefaultPermissions / CreateTableDefaultPermissions grant ALL to
# IAM_ALLOWED_PRINCIPALS ("Use only IAM access control"); an empty list means
# access control by Lake Formation permissions
# (https://docs.aws.amazon.com/lake-formation/latest/dg/change-settings.html,
# https://docs.aws.amazon.com/lake-formation/latest/APIReference/API_DataLakeSettings.html).
# A database that exists already carries its own CreateTableDefaultPermissions
# for the tables created in it
# (https://docs.aws.amazon.com/glue/latest/webapi/API_Database.html).
IAM_ALLOWED_PRINCIPALS: Final = "IAM_ALLOWED_PRINCIPALS"


def iam_only(entries: Iterable[Mapping[str, Any]] | None) -> bool:
    """True when the default permissions grant ALL to IAM_ALLOWED_PRINCIPALS
    (IAM alone controls access to what is created). Pure."""
    return any(
        entry.get("Principal", {}).get("DataLakePrincipalIdentifier") == IAM_ALLOWED_PRINCIPALS
        and "ALL" in entry.get("Permissions", [])
        for entry in entries or []
    )


def lake_formation_governs(
    settings: Mapping[str, Any], database: Mapping[str, Any] | None
) -> list[str]:
    """What Lake Formation governs of what the stack creates: ``new databases``,
    ``new tables`` (the data lake defaults, absent meaning Lake Formation) and,
    when the instance's database exists already, ``new tables in <db>`` (its
    own defaults). Empty: IAM alone. Pure."""
    governed = []
    if not iam_only(settings.get("CreateDatabaseDefaultPermissions")):
        governed.append("new databases")
    if not iam_only(settings.get("CreateTableDefaultPermissions")):
        governed.append("new tables")
    # A database read without the field says nothing of its own (the data lake
    # defaults above decide); an empty list is Lake Formation's, as above.
    own = None if database is None else database.get("CreateTableDefaultPermissions")
    if database is not None and own is not None and not iam_only(own):
        governed.append(f"new tables in {database.get('Name', '?')}")
    return governed


def check_lake_formation(config: InstanceConfig, clients: Clients) -> Result:
    name = "Lake Formation"
    option = '"lake_formation_permissions": true'
    try:
        settings = clients["lakeformation"].get_data_lake_settings()["DataLakeSettings"]
    except Exception as exc:
        if access_denied(exc):
            return Result(
                name,
                False,
                "GetDataLakeSettings was refused (access denied), so whether Lake Formation "
                "governs the Data Catalog is unknown",
                iam_fix("lakeformation:GetDataLakeSettings")
                + f"; or, if Lake Formation governs it, set {option} in the instance's "
                "cdk.json entry",
            )
        return Result(
            name,
            False,
            f"GetDataLakeSettings failed: {error_text(exc)}",
            iam_fix("lakeformation:GetDataLakeSettings"),
        )
    glue = clients["glue"]
    database: Mapping[str, Any] | None = None
    unchecked = ""
    try:
        database = glue.get_database(Name=config.database_name)["Database"]
    except glue.exceptions.EntityNotFoundException:
        database = None  # the stack creates it: the data lake defaults apply
    except Exception as exc:
        unchecked = f"; database {config.database_name} not read: {error_text(exc)}"
    governed = lake_formation_governs(settings, database)
    if not governed:
        return Result(
            name,
            True,
            "IAM alone controls new databases and tables (IAM_ALLOWED_PRINCIPALS has ALL)"
            + unchecked,
        )
    what = f"Lake Formation governs {', '.join(governed)}"
    if config.lake_formation_permissions:
        return Result(name, True, f"{what}; lake_formation_permissions is on" + unchecked)
    return Result(
        name,
        False,
        f"{what}: the job role and the table optimizer roles need Lake Formation grants "
        "on the database and the table (IAM policies alone are not enough)" + unchecked,
        f"set {option} in the {config.instance_id} entry of cdk.json",
    )
