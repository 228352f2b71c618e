"""scripts.stop: the marker, the bounded wait on the lease, the exit codes.

The "job" here is a small Python process that holds the real lease
(:class:`model.lease.FileLease`) and watches the real marker
(:class:`model.graceful_stop.StopMarker`), behaving as told: stop gracefully,
ignore the marker, or exit without taking it. No Spark: the command only
sees the lease and the marker, which is all it relies on.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local.harness import replace_fields
from model.config import JobConfig
from model.polling import poll_until
from scripts import stop
from scripts.status.lease import JobState, file_lease_state, process_alive
from scripts.status.target import Target
from tests.scripts.local_runs import INSTANCE, REGION, write_local_run

FAKE_JOB = """
import pathlib, sys, time
from model.graceful_stop import StopMarker
from model.lease import FileLease, owner_id
checkpoint, marker_path, mode = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
lease = FileLease(checkpoint / "_lease", "t", owner_id())
lease.acquire(5)
(checkpoint / "ready").write_text("1")
marker = StopMarker(marker_path)
while not marker.present() or mode == "ignore":
    time.sleep(0.05)
if mode == "graceful":
    time.sleep(0.5)  # the batch in flight
    marker.consume()
if mode in ("recorded", "failed"):
    # The job's own record of how it ended (job/outcome.py), the marker left.
    from model.exit_record import ExitRecord, write_exit_record
    by = "operator" if mode == "recorded" else None
    reason = "stopped_on_request" if by else "batch_failed"
    write_exit_record(str(checkpoint), ExitRecord(
        0 if by else 1, reason, "stop marker" if by else "boom", time.time(), "h:1", by))
lease.release()
"""
# Ample for a job that stops or ends on its own while the command waits.
WAIT_FOR_EXIT = ("--timeout", "30", "--poll-sec", "0.1")


@pytest.fixture
def local_job(tmp_path: Path) -> Iterator[tuple[JobConfig, list[subprocess.Popen[bytes]]]]:
    config = write_local_run(tmp_path)
    started: list[subprocess.Popen[bytes]] = []
    yield config, started
    for process in started:
        process.kill()
        process.wait(timeout=10)


def start(config: JobConfig, mode: str, started: list[subprocess.Popen[bytes]]) -> int:
    checkpoint = Path(config.checkpoint_location)
    checkpoint.mkdir(parents=True, exist_ok=True)
    assert config.stop_marker_path is not None
    process = subprocess.Popen(
        [sys.executable, "-c", FAKE_JOB, str(checkpoint), config.stop_marker_path, mode]
    )
    started.append(process)
    poll_until(
        (checkpoint / "ready").exists,
        timeout=30,
        interval=0.05,
        on_timeout=lambda: TimeoutError("the fake job did not take the lease"),
    )
    return process.pid


def run_stop(work_dir: Path, *extra: str) -> tuple[int, str, float]:
    out = io.StringIO()
    began = time.monotonic()
    code = stop.main(["--instance", INSTANCE, "--work-dir", str(work_dir), *extra], out)
    return code, out.getvalue(), time.monotonic() - began


def test_the_lease_says_whether_the_job_runs(
    local_job: tuple[JobConfig, list[subprocess.Popen[bytes]]],
) -> None:
    config, started = local_job
    lease = Path(config.checkpoint_location) / "_lease"
    assert file_lease_state(lease) == JobState(False, str(lease))
    pid = start(config, "ignore", started)
    held = file_lease_state(lease)
    assert held.running and held.local_pid == pid
    started[0].kill()
    started[0].wait(timeout=10)
    assert not file_lease_state(lease).running  # the kernel dropped the flock
    assert not process_alive(pid)


def marker_left(config: JobConfig) -> bool:
    """The stop marker is (still) there."""
    assert config.stop_marker_path is not None
    return Path(config.stop_marker_path).exists()


def test_stop_waits_for_a_graceful_exit(
    tmp_path: Path, local_job: tuple[JobConfig, list[subprocess.Popen[bytes]]]
) -> None:
    config, started = local_job
    pid = start(config, "graceful", started)
    code, out, seconds = run_stop(tmp_path, *WAIT_FOR_EXIT)
    assert code == stop.EXIT_STOPPED, out
    assert "stop marker written" in out and "stopped gracefully" in out
    assert not process_alive(pid) and started[0].poll() == 0
    assert not marker_left(config)
    assert seconds < 30


def test_a_job_that_is_not_running_gets_no_marker(
    tmp_path: Path, local_job: tuple[JobConfig, list[subprocess.Popen[bytes]]]
) -> None:
    config, _ = local_job
    code, out, _ = run_stop(tmp_path)
    assert code == stop.EXIT_STOPPED and "nothing to stop, no marker written" in out
    assert not marker_left(config)


@dataclass(frozen=True)
class Outcome:
    """What ``make stop-job`` ends with: its exit code, what it says, and the
    bound on how long it took. The marker is left for the job in every case."""

    code: int
    said: tuple[str, ...]
    within_sec: float


def exits_during_the_wait(mode: str, code: int, *said: str, id: str) -> Any:
    """A case whose job ends on its own while the command waits for it."""
    return pytest.param(mode, WAIT_FOR_EXIT, Outcome(code, said, 30), id=id)


@pytest.mark.parametrize(
    ("mode", "args", "outcome"),
    [
        pytest.param(
            "ignore",
            ("--timeout", "1", "--poll-sec", "0.2"),
            Outcome(stop.EXIT_TIMEOUT, ("still running", "the marker stays"), 10),
            id="a job that does not stop in time keeps its marker",
        ),
        exits_during_the_wait(
            "crash",
            stop.EXIT_NOT_TAKEN,
            "without taking the stop marker",
            "the marker stays",
            id="a job that exits without the marker is reported and stays stopped",
        ),
        exits_during_the_wait(
            "recorded",
            stop.EXIT_STOPPED,
            "stopped gracefully",
            "(exit 0 stopped_on_request by operator: stop marker)",
            id="the exit record says it stopped on request, whatever the marker",
        ),
        exits_during_the_wait(
            "failed",
            stop.EXIT_NOT_TAKEN,
            "not on the stop: exit 1 batch_failed: boom",
            "until make start-job",
            id="the exit record says it failed first",
        ),
        pytest.param(
            "ignore",
            ("--timeout", "0"),
            Outcome(stop.EXIT_STOPPED, ("stop marker written",), 10),
            id="timeout zero only writes the marker",
        ),
    ],
)
def test_a_stop_that_is_not_graceful(
    tmp_path: Path,
    local_job: tuple[JobConfig, list[subprocess.Popen[bytes]]],
    mode: str,
    args: tuple[str, ...],
    outcome: Outcome,
) -> None:
    config, started = local_job
    start(config, mode, started)
    code, out, seconds = run_stop(tmp_path, *args)
    assert code == outcome.code, out
    assert [s for s in outcome.said if s not in out] == [], out
    assert marker_left(config)
    assert seconds < outcome.within_sec


def test_exited_needs_a_free_lease_and_a_gone_process() -> None:
    free, held = JobState(False, "l"), JobState(True, "l", "h:1")
    assert stop.exited(free, None, lambda _: True)
    assert not stop.exited(held, None, lambda _: False)
    assert not stop.exited(free, 42, lambda _: True)
    assert stop.exited(free, 42, lambda _: False)


def test_stop_on_s3(tmp_path: Path) -> None:
    """On AWS the marker and the lease are S3 objects: a live lease gets the
    marker and the bounded wait; an expired one (a killed job) gets none."""
    local = write_local_run(tmp_path)
    config = replace_fields(
        local,
        {"checkpoint_location": "s3://data/checkpoints/x/", "stop_marker_path": "s3://data/stop"},
    )
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="data", CreateBucketConfiguration={"LocationConstraint": REGION})
        target = Target(config, "test", "Streaming-x", local=False)
        lines: list[str] = []

        def lease(expires_at: float) -> None:
            body = json.dumps({"owner": "ip-10-0-0-1:77", "expires_at": expires_at})
            s3.put_object(Bucket="data", Key="checkpoints/x/_lease", Body=body.encode())

        lease(time.time() - 1)
        assert stop.stop(target, timeout=5, poll_sec=0.1, log=lines.append) == 0
        assert "not running" in lines[-1]
        assert s3.list_objects_v2(Bucket="data", Prefix="stop").get("KeyCount") == 0
        lease(time.time() + 3600)
        assert stop.stop(target, timeout=0.5, poll_sec=0.1, log=lines.append) == 4
        assert s3.get_object(Bucket="data", Key="stop")["Body"].read() == b"stop\n"
        s3.delete_object(Bucket="data", Key="stop")

        def job_takes_the_marker() -> None:  # what job.driver does: consume, then release
            poll_until(
                lambda: s3.list_objects_v2(Bucket="data", Prefix="stop").get("KeyCount"),
                timeout=10,
                interval=0.05,
                on_timeout=lambda: TimeoutError("no marker"),
            )
            time.sleep(0.3)
            s3.delete_object(Bucket="data", Key="stop")
            s3.delete_object(Bucket="data", Key="checkpoints/x/_lease")

        job = threading.Thread(target=job_takes_the_marker)
        job.start()
        assert stop.stop(target, timeout=10, poll_sec=0.1, log=lines.append) == 0
        job.join(timeout=10)
        assert "stopped gracefully" in lines[-1]


@pytest.mark.parametrize(
    ("args", "refused"),
    [
        (("--timeout", "-1"), "--timeout"),
        (("--timeout", "-0.5", "--poll-sec", "0.1"), "--timeout"),
        (("--poll-sec", "-1"), "--poll-sec"),
        (("--poll-sec", "0"), "--poll-sec"),
        (("--timeout", "nan"), "--timeout"),
        (("--timeout", "ten"), "--timeout"),
    ],
)
def test_a_bad_number_exits_2_and_writes_no_marker(
    tmp_path: Path,
    local_job: tuple[JobConfig, list[subprocess.Popen[bytes]]],
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    refused: str,
) -> None:
    """A typo must not stop a production job; the job runs."""
    config, started = local_job
    start(config, "ignore", started)
    with pytest.raises(SystemExit) as exited:
        run_stop(tmp_path, *args)
    assert exited.value.code == 2
    assert f"argument {refused}" in capsys.readouterr().err
    assert not marker_left(config)
    assert started[0].poll() is None
