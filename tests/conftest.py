"""Session-scoped fixtures shared by every test folder, and the test tiers.

One SparkSession (local[2], Hive catalog on an embedded Derby metastore under a
temporary work directory, UI off) built from the same conf source as EMR, and
one pair of emulators (moto server + tansu) on free loopback ports. Both are
stopped at the end of the session. Under ``make test`` each of the two xdist
workers is a session of its own ("Parallel workers" below says what runs where).

Tiers (``make help``; each test lands in exactly one):

* ``unit`` (``make test-fast``): fakes, in-process ``moto.mock_aws``, a
  construct in a bare ``Stack``; no JVM, no emulator process, no synthesis of
  the whole app. A guard fails any unit test that starts a JVM.
* ``synth`` (``make test-synth``): the CDK app or a stack synthesized once per
  session (the synth fixtures of ``tests/infra`` and ``tests/deploy``).
* ``integration`` (``make test-integration``): the ``spark`` fixture (marked
  ``spark`` too) or a child process that starts a JVM (mark it ``spark``), and/or
  the ``endpoints`` fixture (marked ``emulators``).
* ``e2e`` (``make test-e2e``): the job as a child process on fresh emulators
  (``tests/e2e``; marked in the file, or using its fixtures).

:func:`pytest_collection_modifyitems` assigns them from the fixtures a test
uses, so a file need not mark itself.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

from job.session import build_session
from local.emulators import Endpoints, emulators
from model.spark_conf import local_conf
from producer.local_run import FAKE_CREDENTIALS

# Python workers must run the venv's interpreter (pyarrow, boto3 live there),
# and no test may reach a real AWS account.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
for _key, _value in FAKE_CREDENTIALS.items():
    os.environ[_key] = _value
os.environ["AWS_DEFAULT_REGION"] = "us-east-1"

# Every JVM a test starts (the SparkSession, ``python -m job``, spark-submit and
# the launcher JVM in front of each) lives for seconds to minutes, on two cores
# shared with the other worker: C2's compiler threads and the parallel
# collector's threads then only take CPU from the tests. C1 alone and the
# serial collector cut an e2e case by about a third (test_operate: 39-48 s to
# 30-33 s). The JVM reads JAVA_TOOL_OPTIONS itself, so children inherit it.
# ``make bench`` and ``make run`` do not: their figures are about the product.
TEST_JVM_OPTIONS: Final = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# xdist's workers inherit the controller's value: add only what is missing.
_INHERITED_JVM_OPTIONS = os.environ.get("JAVA_TOOL_OPTIONS", "").split()
os.environ["JAVA_TOOL_OPTIONS"] = " ".join(
    [*(o for o in TEST_JVM_OPTIONS if o not in _INHERITED_JVM_OPTIONS), *_INHERITED_JVM_OPTIONS]
)

TESTS = Path(__file__).resolve().parent
SPARK_FIXTURES = frozenset({"spark"})
EMULATOR_FIXTURES = frozenset({"endpoints"})
SYNTH_FIXTURES = frozenset({"synthesized", "synthesized_declared", "synthesized_existing"})
E2E_FIXTURES = frozenset({"emulators", "kafka_on_s3_emulators", "make_local"})
TIERS = ("unit", "synth", "integration", "e2e")


def tier_of(item: pytest.Item) -> str:
    """The one tier of a test, by what it needs (highest need wins)."""
    names = set(getattr(item, "fixturenames", ()))
    in_e2e_folder = (TESTS / "e2e") in Path(str(item.path)).parents
    if item.get_closest_marker("e2e") or (in_e2e_folder and names & E2E_FIXTURES):
        return "e2e"
    if (
        names & (SPARK_FIXTURES | EMULATOR_FIXTURES)
        or item.get_closest_marker("spark")
        or item.get_closest_marker("emulators")
    ):
        return "integration"
    if names & SYNTH_FIXTURES or item.get_closest_marker("synth"):
        return "synth"
    return "unit"


TIER_OF_TEST = pytest.StashKey[dict[str, str]]()


@pytest.hookimpl(tryfirst=True)  # before -m deselects: every collected test gets its tier
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tiers = config.stash.setdefault(TIER_OF_TEST, {})
    for item in items:
        tier = tiers[item.nodeid] = tier_of(item)
        names = set(getattr(item, "fixturenames", ()))
        if tier == "integration":
            if names & SPARK_FIXTURES:
                item.add_marker("spark")
            if names & EMULATOR_FIXTURES:
                item.add_marker("emulators")
        # An explicit synth mark may stay on a test that also needs the
        # emulators (tests/deploy/test_redeploy.py): make test-synth selects
        # "synth and not integration". Any other mark must agree with the tier.
        for other in TIERS:
            if other not in (tier, "synth") and item.get_closest_marker(other):
                raise pytest.UsageError(f"{item.nodeid}: marked {other} but is a {tier} test")
        item.add_marker(tier)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        _plan_for_workers(items, tiers)


# --- Parallel workers (make test: pytest -n 2 --dist loadscope) -----------------------------
# Each worker is its own session, so a session or module fixture (the SparkSession,
# a synthesized app, the emulators) is built once in every worker that runs a
# test needing it. So every test outside tests/e2e runs with the rest of its
# file on one worker (its fixtures built at most once per worker, as in a run
# of that file alone), and each e2e case, which starts its own emulators and
# job, goes to whichever worker is free (FileOrE2eCase). The longest come first:
# the cases with the largest timeout mark, then e2e, integration, synth, and
# the short unit tests last, to fill the end of both workers. The order is the
# same on every worker (xdist requires it). xdist's own loadgroup cannot do
# this here: it renames node ids, which pytest 9 no longer lets a plugin do.
_TIER_ORDER = {"e2e": 0, "integration": 1, "synth": 2, "unit": 3}
E2E_PREFIX = f"{(TESTS / 'e2e').relative_to(TESTS.parent).as_posix()}/"


def _timeout_of(item: pytest.Item) -> float:
    mark = item.get_closest_marker("timeout")
    return float(mark.args[0]) if mark is not None and mark.args else 0.0


def _plan_for_workers(items: list[pytest.Item], tiers: dict[str, str]) -> None:
    rank = {
        id(item): (-_timeout_of(item), _TIER_ORDER[tiers[item.nodeid]], index)
        for index, item in enumerate(items)
    }
    items.sort(key=lambda item: rank[id(item)])


class FileOrE2eCase(LoadScopeScheduling):  # type: ignore[misc]
    """``--dist loadscope`` with this suite's scopes: an e2e case alone, any
    other test with its file."""

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.startswith(E2E_PREFIX):
            return nodeid
        return nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    return FileOrE2eCase(config, log) if config.getvalue("dist") == "loadscope" else None


# --- The JVM guard of the unit tier --------------------------------------------------------
# Every JVM this project starts (in-process SparkSession, ``python -m job``,
# ``spark-submit``) goes through Spark's ``bin/spark-class``, which runs
# ``$JAVA_HOME/bin/java`` (or ``java`` on PATH). During a unit test both point
# at a stub that records the command line and exits 97, so a unit test that
# starts a JVM, even in a grandchild process, fails with the command named.

_JAVA_STUB = """#!/bin/sh
printf '%s\\n' "java $*" >> '{log}'
echo "JVM guard: a unit-tier test tried to start a JVM (java $*)" >&2
exit 97
"""


@pytest.fixture(scope="session")
def jvm_guard_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A fake JAVA_HOME whose ``bin/java`` only records its calls; and the record."""
    home = tmp_path_factory.mktemp("jvm-guard")
    record = home / "started.log"
    record.touch()
    java = home / "bin" / "java"
    java.parent.mkdir()
    java.write_text(_JAVA_STUB.format(log=record), encoding="utf-8")
    java.chmod(java.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return home, record


@pytest.fixture(autouse=True)
def _no_jvm_in_unit_tests(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    home, record = request.getfixturevalue("jvm_guard_home")
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    before = record.stat().st_size
    yield
    with record.open(encoding="utf-8") as log:
        log.seek(before)
        started = log.read()
    if started:
        pytest.fail(
            "a unit-tier test started a JVM; it belongs in the integration tier "
            f"(use the spark fixture or mark it spark):\n{started}",
            pytrace=False,
        )


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
