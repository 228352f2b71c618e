"""``main()``: configuration errors, the lease refusal and the version the
lease names (the digest of ``--config``, model.job_version, which the
supervisor derives from the stack's step), S3 configs (moto in-process),
and a real ``python -m job`` process (a JVM: integration tier) stopped by
SIGTERM with exit code 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from job import driver
from job.driver import load_config, local_work_dir, main
from job.outcome import ExitCode
from local.emulators import Endpoints
from model.config import ConfigError
from model.job_version import version_of
from model.lease import FileLease, JobState, file_lease_state
from tests.job.job_helpers import event, job_config
from tests.waits import poll

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_signals() -> Iterator[None]:
    saved = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGTERM, saved[0])
    signal.signal(signal.SIGINT, saved[1])


def _write(path: Path, raw: dict[str, Any]) -> str:
    path.write_text(json.dumps(raw), encoding="utf-8")
    return str(path)


def test_bad_config_exits_2_naming_the_field(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    raw = job_config(database="d", bootstrap="b:1").to_dict()
    raw["trigger_interval_sec"] = 0
    assert main(["--config", _write(tmp_path / "c.json", raw)]) == ExitCode.BAD_CONFIG
    assert "trigger_interval_sec: bad value 0; allowed: an integer > 0" in caplog.text
    assert main(["--config", str(tmp_path / "missing.json")]) == ExitCode.BAD_CONFIG


def test_second_copy_refuses_to_start_with_exit_3(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = tmp_path / "checkpoint"
    config = job_config(database="d", bootstrap="b:1", checkpoint=str(checkpoint))
    raw = {**config.to_dict(), "lease_ttl_sec": 1, "lease_wait_sec": 1}
    holder = FileLease(checkpoint / "_lease", config.instance_id, "first-copy")
    holder.acquire(wait_sec=0)
    try:
        assert main(["--config", _write(tmp_path / "c.json", raw)]) == ExitCode.LEASE_HELD
    finally:
        holder.release()
    assert "first-copy" in caplog.text and "refusing to start" in caplog.text


@mock_aws
def test_config_is_read_from_s3() -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    bucket = f"cfg-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    config = job_config(database="d", bootstrap="b:1")
    s3.put_object(Bucket=bucket, Key="job/config.json", Body=config.to_json().encode())
    assert load_config(f"s3://{bucket}/job/config.json", s3_client=s3) == config
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(f"s3://{bucket}/nope.json", s3_client=s3)


def test_local_work_dir_is_beside_a_local_checkpoint_and_none_on_s3(tmp_path: Path) -> None:
    local = job_config(database="d", bootstrap="b:1", checkpoint=str(tmp_path / "cp"))
    assert local_work_dir(local, None) == str(tmp_path)
    assert local_work_dir(local, "/explicit") == "/explicit"
    remote = job_config(database="d", bootstrap="b:1", checkpoint="s3://bucket/cp")
    assert local_work_dir(remote, None) is None


@pytest.mark.spark  # a JVM in the child process: integration tier
def test_sigterm_stops_the_job_process_with_exit_0(endpoints: Endpoints, tmp_path: Path) -> None:
    kinesis = boto3.client("kinesis", endpoint_url=endpoints.aws_url, region_name="us-east-1")
    stream = f"main-{uuid.uuid4().hex[:8]}"
    kinesis.create_stream(StreamName=stream, ShardCount=1)
    kinesis.get_waiter("stream_exists").wait(
        StreamName=stream, WaiterConfig={"Delay": 1, "MaxAttempts": 20}
    )
    kinesis.put_record(StreamName=stream, Data=event("sig-1"), PartitionKey="k")
    config = job_config(
        database="main_sigterm",
        bootstrap=endpoints.kafka_bootstrap,
        checkpoint=str(tmp_path / "checkpoint"),
        stream_name=stream,
        kinesis_endpoint_url=endpoints.aws_url,
        trigger_interval_sec=1,
        stop_poll_interval_sec=1,
        metrics={"endpoint_url": endpoints.aws_url},
    )
    config_path = _write(tmp_path / "c.json", config.to_dict())
    log_path = tmp_path / "job.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "job", "--config", config_path],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def first_batch() -> bool:
            text = log_path.read_text(errors="replace")
            assert process.poll() is None, text[-3000:]
            return "batch 0:" in text

        poll(first_batch, "batch 0 in the job's log", timeout=240)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=120)
        assert code == ExitCode.OK, log_path.read_text(errors="replace")[-3000:]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
    text = log_path.read_text(errors="replace")
    assert "stop requested (signal SIGTERM)" in text
    assert "stopped gracefully" in text
    assert (tmp_path / "checkpoint" / "commits" / "0").exists()


def test_a_horizon_shorter_than_the_retention_is_refused_before_start() -> None:
    with pytest.raises(ConfigError, match=r"dedup_horizon_hours: bad value 24; allowed: >= "):
        job_config(database="db", bootstrap="127.0.0.1:1", stream_retention_hours=48)


def test_the_job_holds_its_lease_under_the_version_of_its_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = tmp_path / "checkpoint"
    config = job_config(database="d", bootstrap="b:1", checkpoint=str(checkpoint))
    config_path = tmp_path / "job-config.json"
    config_path.write_text(json.dumps(config.to_dict()), encoding="utf-8")
    seen: list[JobState] = []

    def probe(*_args: Any, **_kw: Any) -> ExitCode:
        seen.append(file_lease_state(checkpoint / "_lease"))
        return ExitCode.OK

    monkeypatch.setattr(driver, "_under_lease", probe)
    assert main(["--config", str(config_path)]) == ExitCode.OK
    [held] = seen
    assert held.running
    assert held.version == version_of(str(config_path))
    assert not file_lease_state(checkpoint / "_lease").running, "released on the way out"
