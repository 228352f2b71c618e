"""bench/serverless_sizing.py's arithmetic and its reading of the process tree."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.serverless_sizing import (
    DRIVER_PYTHON,
    EXECUTOR_PYTHON,
    JVM,
    TreeSampler,
    classify,
    fixed_and_rate,
)
from model.polling import poll_until


@pytest.mark.parametrize(
    ("cmdline", "part"),
    [
        (["/usr/lib/jvm/java-17/bin/java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit"], JVM),
        (["/v/bin/python", "/w/job-package-1/main.py", "--config", "c"], DRIVER_PYTHON),
        (["/v/bin/python", "-m", "pyspark.daemon", "pyspark.sql.worker.lookup"], DRIVER_PYTHON),
        (["/v/bin/python", "-m", "pyspark.daemon", "pyspark.worker"], EXECUTOR_PYTHON),
        (["/v/bin/python", "-m", "pyspark.daemon"], EXECUTOR_PYTHON),
        (["/bin/bash", "spark-submit"], None),
        ([], None),
    ],
)  # fmt: skip
def test_each_process_of_the_job_counts_on_its_side(cmdline: list[str], part: str | None) -> None:
    assert classify(cmdline) == part


def test_the_trigger_holds_the_rate_whose_batches_fit_in_it() -> None:
    # 10 s trigger, 2 s fixed, 500 records/s: 8 s left for 8 x 500 / 10 = 400 records/s.
    assert fixed_and_rate(2_000.0, 500.0, 10.0) == pytest.approx(400.0)
    # A batch's fixed part alone longer than the trigger holds no rate.
    assert fixed_and_rate(12_000.0, 500.0, 10.0) == 0.0


def test_the_sampler_reads_each_part_as_rss_and_as_its_smaller_share() -> None:
    # A tree of its own: one Python process that is not the driver's (this
    # test's worker may have a JVM child of another test's Spark session).
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    sampler = TreeSampler(child.pid)
    sampler.phase = "here"
    sampler.start()
    try:
        poll_until(
            lambda: sampler.samples >= 2,
            timeout=30,
            interval=0.05,
            on_timeout=lambda: AssertionError(f"{sampler.samples} samples in 30 s"),
        )
    finally:
        sampler.stop()
        child.kill()
        child.wait(timeout=30)
    rss, pss = sampler.peaks["here"], sampler.pss_peaks["here"]
    assert rss[EXECUTOR_PYTHON] > 1
    assert 0 < pss[EXECUTOR_PYTHON] <= rss[EXECUTOR_PYTHON]
    assert rss[JVM] == pss[JVM] == 0
    assert rss[DRIVER_PYTHON] == pss[DRIVER_PYTHON] == 0
