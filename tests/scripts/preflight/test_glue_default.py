"""scripts.preflight.glue_default: the Data Catalog's ``default`` database, which
Spark's Hive client reads at start."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from scripts.preflight import glue_default
from tests.scripts.preflight.stubs import EntityNotFoundError, GlueStub, _access_denied, _config


class _EmptyCatalog:
    """A Data Catalog without a ``default`` database; or one that refuses the read."""

    exceptions = SimpleNamespace(EntityNotFoundException=EntityNotFoundError)

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse

    def get_database(self, Name: str) -> Any:  # noqa: N803 (boto3's keyword)
        if self.refuse:
            raise _access_denied("GetDatabase")
        raise EntityNotFoundError({"Error": {"Code": "EntityNotFoundException"}}, "GetDatabase")


def test_the_default_database_passes() -> None:
    result = glue_default.check_glue_default(_config(), {"glue": GlueStub()})
    assert (result.status, result.detail) == ("PASS", "the 'default' database exists")


def test_a_missing_default_database_fails_with_the_create_command() -> None:
    result = glue_default.check_glue_default(_config(), {"glue": _EmptyCatalog()})
    create = "aws glue create-database --region eu-west-1 --database-input Name=default"
    assert (result.status, result.fix) == (
        "FAIL",
        f"create it once per account and region: {create}",
    )
    assert "no 'default' database in the eu-west-1 Data Catalog" in result.detail


def test_a_refused_read_fails_naming_the_permission() -> None:
    result = glue_default.check_glue_default(_config(), {"glue": _EmptyCatalog(refuse=True)})
    assert result.status == "FAIL"
    assert result.detail.startswith("GetDatabase failed: ")
    assert "glue:GetDatabase" in result.fix
