"""The project's production packages, one list for the tests that walk them
(the layout check, the import rules, the function-level import scan)."""

from __future__ import annotations

from typing import Final

PRODUCTION_PACKAGES: Final = (
    "model",
    "emr",
    "job",
    "infra",
    "artifacts",
    "producer",
    "local",
    "scripts",
    "bench",
    "integ",
)
