"""Opening the local SQLite catalog while another opener creates its tables."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from job.table import catalog


class _Flaky:
    """Stands in for ``SqlCatalog``: the first open fails with ``error``."""

    def __init__(self, error: str) -> None:
        self.error = error
        self.opened = 0

    def __call__(self, name: str, **props: Any) -> dict[str, Any]:
        self.opened += 1
        if self.opened == 1:
            raise OperationalError("CREATE TABLE iceberg_tables", {}, Exception(self.error))
        return {"name": name, **props}


def test_a_catalog_whose_tables_another_opener_just_created_opens_on_the_second_try(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flaky = _Flaky("table iceberg_tables already exists")
    monkeypatch.setattr("pyiceberg.catalog.sql.SqlCatalog", flaky)
    opened = catalog._open_sql("sqlite:///x.db", "file:///w", {"s3.region": "eu-west-1"})
    assert flaky.opened == 2
    assert opened == {
        "name": "local",
        "uri": "sqlite:///x.db",
        "warehouse": "file:///w",
        "s3.region": "eu-west-1",
    }


def test_any_other_catalog_error_is_raised_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    flaky = _Flaky("database is locked")
    monkeypatch.setattr("pyiceberg.catalog.sql.SqlCatalog", flaky)
    with pytest.raises(OperationalError, match="database is locked"):
        catalog._open_sql("sqlite:///x.db", "file:///w", {})
    assert flaky.opened == 1
