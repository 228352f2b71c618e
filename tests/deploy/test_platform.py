"""The platform the job is built for, held equal in every place that names it.

The release table (emr/releases.py), the pinned pyspark wheel, and the job's
runtime lock must agree, or a deploy runs code tested on one Spark on another
(Jackson, the 4.1 migration items in docs/job.md), or a node lacks the Python
the bootstrap installs for. Spark 4.1's floors (PySpark migration guide,
"Upgrading from PySpark 4.0 to 4.1"): Python >= 3.10, PyArrow >= 15.0.0, and
pandas >= 2.2.0 (pyspark.sql.pandas.utils).
"""

from __future__ import annotations

import re
from pathlib import Path

import pyspark
import pytest

from emr.releases import (
    DEFAULT_RELEASE_LABEL,
    JOB_SPARK_VERSION,
    RELEASES,
    release_for,
    supported_labels,
)

REPO = Path(__file__).resolve().parents[2]


def _pins(path: Path) -> dict[str, str]:
    found = re.findall(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s\\]+)", path.read_text(), re.M)
    return {name.lower(): version for name, version in found}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def test_the_job_spark_is_the_wheel_and_the_pin() -> None:
    assert pyspark.__version__ == JOB_SPARK_VERSION
    assert _pins(REPO / "requirements-dev.txt")["pyspark"] == JOB_SPARK_VERSION


def test_the_default_release_is_the_lts_and_runs_the_jobs_spark() -> None:
    release = release_for(DEFAULT_RELEASE_LABEL)
    assert release.label == "emr-spark-8.1.0"
    assert release.spark == JOB_SPARK_VERSION
    assert supported_labels() == ("emr-spark-8.1.0",)
    # Known, refused: its Spark is 4.0.2.
    assert not RELEASES["emr-spark-8.0.0"].supported


@pytest.mark.parametrize("label", supported_labels())
def test_every_supported_release_ships_a_python_spark_accepts(label: str) -> None:
    pythons = release_for(label).pythons
    assert pythons
    for path in pythons:
        found = re.fullmatch(r"/usr/bin/python(\d+)\.(\d+)", path)
        assert found is not None, path
        assert (int(found[1]), int(found[2])) >= (3, 10), f"{path}: Spark 4.1 needs >= 3.10"
    # The bootstrap's own default, used when it runs without --python.
    script = (REPO / "bootstrap" / "install_python_deps.sh").read_text()
    default = re.search(r'^PYTHON="([^"]+)"', script, re.M)
    assert default is not None and default[1] in pythons


@pytest.mark.parametrize("lock", ["job/requirements.lock", "requirements-dev.txt"])
def test_the_arrow_and_pandas_pins_meet_spark_4_1s_floors(lock: str) -> None:
    pins = _pins(REPO / lock)
    assert _version(pins["pyarrow"]) >= (15, 0, 0)
    assert _version(pins["pandas"]) >= (2, 2, 0)
