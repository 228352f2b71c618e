"""The operator scripts default to ``./cdk.json``, the user's own instances;
these tests name instances of the example (tests/fixtures/cdk.json), so that
default points there for every test of this folder."""

from __future__ import annotations

import pytest

from scripts import status_target
from tests.fixtures import EXAMPLE_CDK_JSON


@pytest.fixture(autouse=True)
def _example_instances(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(status_target, "DEFAULT_CDK_JSON", EXAMPLE_CDK_JSON)
