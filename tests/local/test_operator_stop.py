"""What ``make run`` does about a job an operator stops mid-run
(local/__main__.py, local/harness.py): it tells that stop from a failure by
the job's exit record, says so in one line, and stops a job that ``make
start-job`` started outside it. The "job" is test_stop's lease-holding
process: the harness sees only the lease, the marker and the exit record."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from local import __main__ as local_run
from local.harness import LocalInstance
from local.observation import Observation
from model import contract
from model.exit_record import ExitRecord, write_exit_record
from model.polling import poll_until
from tests.scripts.local_runs import write_local_run
from tests.scripts.test_stop import FAKE_JOB

SEEN = Observation(seconds=9, batches=3, rows=120, failures=0, expected_rows=500,
                   expected_failures=0, job_running=False)  # fmt: skip


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalInstance]:
    config = write_local_run(tmp_path)
    instance = LocalInstance(None, Path(config.checkpoint_location).parent, None, config, 1)  # type: ignore[arg-type]
    Path(config.checkpoint_location).mkdir(parents=True)
    yield instance


def record(local: LocalInstance, reason: str, by: str | None) -> None:
    write_exit_record(
        local.config.checkpoint_location,
        ExitRecord(0, reason, "stop marker m", time.time(), "h:1", by),
    )


def outside_job(local: LocalInstance, mode: str) -> subprocess.Popen[bytes]:
    """A job holding the lease that the harness did not start (make start-job's)."""
    assert local.config.stop_marker_path is not None
    process = subprocess.Popen(
        [sys.executable, "-c", FAKE_JOB, local.config.checkpoint_location,
         local.config.stop_marker_path, mode]
    )  # fmt: skip
    poll_until(
        lambda: local.lease().running,
        timeout=30,
        interval=0.05,
        on_timeout=lambda: TimeoutError("the fake job took no lease"),
    )
    return process


def test_an_operators_stop_is_told_from_a_failure_by_the_exit_record(
    local: LocalInstance,
) -> None:
    assert not local.stopped_by_operator(), "no record yet"
    record(local, contract.EXIT_STOPPED_ON_REQUEST, contract.STOP_BY_HANDOVER)
    assert not local.stopped_by_operator(), "a handover is not an operator"
    record(local, contract.EXIT_BATCH_FAILED, None)
    assert not local.stopped_by_operator()
    record(local, contract.EXIT_STOPPED_ON_REQUEST, contract.STOP_BY_OPERATOR)
    assert local.stopped_by_operator()


def test_a_job_started_outside_the_run_counts_as_running_and_is_stopped(
    local: LocalInstance,
) -> None:
    process = outside_job(local, "recorded")
    try:
        assert local.job_running and not local.stopped_by_operator()
        assert local.stop_any_job(timeout=30) == 0, "its exit record's code"
        assert not local.job_running
    finally:
        process.kill()
        process.wait(timeout=10)
    assert local.stop_any_job(timeout=1) is None, "nothing left to stop"


@pytest.mark.parametrize(
    ("keep", "said"),
    [
        (False, 'make run ARGS="--keep-emulators" keeps the run going'),
        (True, 'waiting for make start-job INSTANCE=orders-ap-northeast-2 ARGS="--work-dir '),
    ],
)
def test_the_run_says_stopped_by_an_operator_in_one_line(
    local: LocalInstance, keep: bool, said: str
) -> None:
    record(local, contract.EXIT_STOPPED_ON_REQUEST, contract.STOP_BY_OPERATOR)
    args = argparse.Namespace(keep_emulators=keep)
    line = local_run._operator_stop_line(local, SEEN, args, local.root.parent)
    assert line.startswith("[orders-ap-northeast-2] job stopped by an operator (exit 0 "
                           "stopped_on_request by operator: stop marker m)")  # fmt: skip
    assert said in line and "rows 120/500" in line and "\n" not in line


def test_keep_emulators_is_an_option_of_make_run() -> None:
    assert local_run.parse_args(["--keep-emulators"]).keep_emulators
    assert not local_run.parse_args([]).keep_emulators
