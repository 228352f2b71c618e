"""The Glue ``default`` database exists (Spark's Hive client reads it at start)."""

from __future__ import annotations

from infra.config import InstanceConfig
from scripts.preflight.result import Clients, Result, error_text, iam_fix


def check_glue_default(config: InstanceConfig, clients: Clients) -> Result:
    name = "Glue default database"
    glue = clients["glue"]
    try:
        glue.get_database(Name="default")
    except glue.exceptions.EntityNotFoundException:
        return Result(
            name,
            False,
            f"no 'default' database in the {config.region} Data Catalog; Spark's Hive "
            "client reads (and would try to create) it at start",
            "create it once per account and region: aws glue create-database "
            f"--region {config.region} --database-input Name=default",
        )
    except Exception as exc:
        return Result(
            name, False, f"GetDatabase failed: {error_text(exc)}", iam_fix("glue:GetDatabase")
        )
    return Result(name, True, "the 'default' database exists")
