"""Session-scoped fixtures shared by every test folder.

One SparkSession (local[2], Hive catalog on an embedded Derby metastore under a
temporary work directory, UI off) built from the same conf source as EMR, and
one pair of emulators (moto server + tansu) on free loopback ports. Both are
stopped at the end of the session.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.session import build_session
from app.spark_conf import local_conf
from local.emulators import FAKE_CREDENTIALS, Endpoints, emulators

# Python workers must run the venv's interpreter (pyarrow, boto3 live there),
# and no test may reach a real AWS account.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
for _key, _value in FAKE_CREDENTIALS.items():
    os.environ[_key] = _value
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"


@pytest.fixture(scope="session")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


@pytest.fixture(scope="session")
def spark(work_dir: Path) -> Iterator[object]:
    conf = local_conf(str(work_dir))
    conf["spark.sql.shuffle.partitions"] = "2"
    session = build_session(conf, "tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def endpoints(work_dir: Path) -> Iterator[Endpoints]:
    with emulators(log_dir=work_dir / "logs") as found:
        yield found
