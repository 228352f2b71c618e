from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import boto3
import pytest

from local.emulators import Endpoints
from tests.conftest import TIER_OF_TEST, TIERS


def test_spark_session_uses_hive_catalog(spark: Any) -> None:
    assert spark.conf.get("spark.sql.catalogImplementation") == "hive"
    assert spark.range(5).count() == 5


def test_moto_kinesis_answers(endpoints: Endpoints) -> None:
    client = boto3.client("kinesis", endpoint_url=endpoints.aws_url, region_name="us-east-1")
    client.create_stream(StreamName="smoke", ShardCount=1)
    client.get_waiter("stream_exists").wait(StreamName="smoke")
    assert [s["ShardId"] for s in client.list_shards(StreamName="smoke")["Shards"]] == [
        "shardId-000000000000"
    ]


def test_each_test_has_the_tier_of_what_it_needs(request: pytest.FixtureRequest) -> None:
    """The tiers come from fixtures and folders (tests/conftest.py); a few known
    cases pin the rules, including a JVM started in a child process."""
    tiers = request.config.stash[TIER_OF_TEST]
    assert set(tiers.values()) <= set(TIERS)
    known = {
        "tests/app/test_job_main.py::test_sigterm_stops_the_job_process_with_exit_0": "integration",
        "tests/app/test_micro_batch.py::test_the_whole_micro_batch_runs_exactly_one_shuffle": (
            "integration"
        ),
        "tests/app/test_lifecycle.py::test_s3_lease_conditional_puts": "unit",
        "tests/app/test_job_supervise.py::test_stop_marker_stops_between_batches_and_is_consumed": (
            "unit"
        ),
        "tests/e2e/test_lifecycle.py::test_second_copy_refuses_to_start_and_the_first_carries_on": (
            "e2e"
        ),
        "tests/e2e/test_local_tools.py::test_percentile_is_nearest_rank": "unit",
        "tests/infra/test_declared_instances.py::test_every_declared_instance_passes_cdk_nag": (
            "synth"
        ),
        "tests/test_smoke.py::test_spark_session_uses_hive_catalog": "integration",
    }
    collected = {nodeid: tier for nodeid, tier in known.items() if nodeid in tiers}
    assert {nodeid: tiers[nodeid] for nodeid in collected} == collected


def test_unit_tests_run_with_the_jvm_guard() -> None:
    """Any JVM goes through JAVA_HOME/bin/java (or java on PATH): both are the stub."""
    java_home = Path(os.environ["JAVA_HOME"])
    assert java_home.name.startswith("jvm-guard")
    assert shutil.which("java") == str(java_home / "bin" / "java")
