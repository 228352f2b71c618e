from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import boto3
import pytest

from local.emulators import Endpoints
from tests.conftest import TEST_JVM_OPTIONS, TESTS, TIER_OF_TEST, TIERS


def test_spark_session_uses_hive_catalog(spark: Any) -> None:
    assert spark.conf.get("spark.sql.catalogImplementation") == "hive"
    assert spark.range(5).count() == 5


def test_the_test_jvms_run_with_c1_only_and_the_serial_collector(spark: Any) -> None:
    """tests/conftest.py's JAVA_TOOL_OPTIONS reach the session's JVM (and so
    every JVM a test starts, which inherit the same environment)."""
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert set(TEST_JVM_OPTIONS) <= set(runtime.getInputArguments())


def test_moto_kinesis_answers(endpoints: Endpoints) -> None:
    client = boto3.client("kinesis", endpoint_url=endpoints.aws_url, region_name="us-east-1")
    client.create_stream(StreamName="smoke", ShardCount=1)
    client.get_waiter("stream_exists").wait(StreamName="smoke")
    assert [s["ShardId"] for s in client.list_shards(StreamName="smoke")["Shards"]] == [
        "shardId-000000000000"
    ]


# A few known cases that pin the tier rules (tests/conftest.py), including a
# JVM started in a child process; by test name, so a test moved to another
# file is still found, and a renamed one fails here by name.
KNOWN_TIERS: Final[dict[str, str]] = {
    "test_sigterm_stops_the_job_process_with_exit_0": "integration",
    "test_the_whole_micro_batch_runs_exactly_one_shuffle": "integration",
    "test_s3_lease_conditional_puts": "unit",
    "test_stop_marker_stops_between_batches_and_is_consumed": "unit",
    "test_second_copy_refuses_then_a_stop_marker_ends_the_first_after_its_batch": "e2e",
    "test_percentile_is_nearest_rank": "unit",
    "test_every_declared_instance_passes_cdk_nag": "synth",
    "test_spark_session_uses_hive_catalog": "integration",
}
# Collects the given node ids in a child pytest and prints the tiers the
# collection hook gave them (on the line after the marker).
_COLLECT_TIERS = """
import json, sys
import pytest

class Report:
    tiers = {}
    def pytest_collection_finish(self, session):
        from tests.conftest import TIER_OF_TEST
        self.tiers = dict(session.config.stash[TIER_OF_TEST])

report = Report()
pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *sys.argv[1:]], plugins=[report])
print("\\nTIERS")
print(json.dumps(report.tiers))
"""


def node_id_of(test_name: str) -> str:
    """The node id of the one module-level test function called ``test_name``."""
    definition = re.compile(rf"^def {re.escape(test_name)}\(", re.MULTILINE)
    found = [
        path
        for path in sorted(TESTS.rglob("test_*.py"))
        if definition.search(path.read_text(encoding="utf-8"))
    ]
    assert len(found) == 1, f"{test_name}: defined in {found or 'no test file'}; expected one"
    return f"{found[0].relative_to(TESTS.parent).as_posix()}::{test_name}"


def tiers_collected_apart(node_ids: list[str]) -> dict[str, str]:
    """The tiers of tests this session did not collect (a run of one file or
    one tier), from a child pytest that collects only them."""
    done = subprocess.run(
        [sys.executable, "-c", _COLLECT_TIERS, *node_ids],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "\nTIERS\n" in done.stdout, done.stdout + done.stderr
    tiers: dict[str, str] = json.loads(done.stdout.rsplit("\nTIERS\n", 1)[1])
    return {node_id: tiers[node_id] for node_id in node_ids if node_id in tiers}


def test_each_test_has_the_tier_of_what_it_needs(request: pytest.FixtureRequest) -> None:
    """The tiers come from fixtures and folders (tests/conftest.py); the known
    cases cover every tier, and each is checked whether or not this session
    collected it (a missing one fails, by name)."""
    tiers = request.config.stash[TIER_OF_TEST]
    assert set(tiers.values()) <= set(TIERS)
    assert set(KNOWN_TIERS.values()) == set(TIERS)
    expected = {node_id_of(name): tier for name, tier in KNOWN_TIERS.items()}
    seen = {node_id: tiers[node_id] for node_id in expected if node_id in tiers}
    apart = sorted(set(expected) - set(seen))
    if apart:
        seen |= tiers_collected_apart(apart)
    assert seen == expected


def test_unit_tests_run_with_the_jvm_guard() -> None:
    """Any JVM goes through JAVA_HOME/bin/java (or java on PATH): both are the stub."""
    java_home = Path(os.environ["JAVA_HOME"])
    assert java_home.name.startswith("jvm-guard")
    assert shutil.which("java") == str(java_home / "bin" / "java")
