"""job/main.py, the file spark-submit runs on EMR: run as a script, its own
folder leaves ``sys.path`` (so ``job/transform.py`` is never imported as a
top-level ``transform``) and the entry is the driver's, as ``python -m job``'s is."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

from job import driver

JOB = Path(__file__).resolve().parents[2] / "job"


def test_run_as_a_script_its_folder_leaves_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [str(JOB), *sys.path, str(JOB) + "/"])
    namespace = runpy.run_path(str(JOB / "main.py"), run_name="spark_submit_script")
    assert not [p for p in sys.path if Path(p or ".").resolve() == JOB]
    assert len(sys.path) > 0
    assert namespace["main"] is driver.main
