"""The S3 facade of local/supervisor/serverless.py: the local checkpoint as the
supervisor and the custom resource handler read it. The lease object exists
exactly while a process holds the lease's flock; the other keys are the files;
other buckets go to the wrapped client."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from infra.serverless.job_run_handler import Checkpoint, Handover
from local.supervisor.serverless import LocalFilesS3, run_until, s3_uri
from model.exit_record import ExitRecord, read_exit_record, write_exit_record
from model.lease import lease_path, make_lease, s3_lease_state
from model.storage_uri import parse_s3_uri, read_object_if_present


@pytest.fixture
def s3() -> Iterator[LocalFilesS3]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="elsewhere")
        yield LocalFilesS3(client)


def test_the_lease_object_exists_while_the_flock_is_held(s3: LocalFilesS3, tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    uri = s3_uri(lease_path(str(checkpoint)))
    assert read_object_if_present(uri, s3) is None  # no lease file yet
    lease = make_lease(str(checkpoint), "orders", ttl_sec=60)
    lease.acquire(1)
    try:
        body = read_object_if_present(uri, s3)
        assert body is not None
        state = s3_lease_state(uri, body, time.time())
        assert state.running and state.holder == json.loads(body)["owner"]
        bucket, key = parse_s3_uri(uri)
        listed = s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)["Contents"]
        assert listed == [{"Key": key}]
    finally:
        lease.release()
    assert Path(lease_path(str(checkpoint))).exists()  # the file stays, the flock is gone
    assert read_object_if_present(uri, s3) is None
    bucket, key = parse_s3_uri(uri)
    assert s3.list_objects_v2(Bucket=bucket, Prefix=key)["Contents"] == []


def test_records_markers_and_other_buckets(s3: LocalFilesS3, tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    record = ExitRecord(2, "config_refused", "retention too long", time.time(), "driver:1")
    write_exit_record(checkpoint, record)  # the job writes its local file
    assert read_exit_record(s3_uri(checkpoint), s3) == record
    assert read_exit_record(s3_uri(tmp_path / "empty"), s3) is None

    marker = tmp_path / "control" / "stop"
    handover = Handover(s3_uri(lease_path(checkpoint)), s3_uri(marker), stop_timeout_sec=1)
    Checkpoint(s3, handover).ask_to_stop("handover requested", time.time())
    assert marker.read_text(encoding="utf-8").startswith("handover requested ")
    Checkpoint(s3, handover).clear_stop()
    assert not marker.exists()

    s3.put_object(Bucket="elsewhere", Key="k", Body=b"moto")
    assert read_object_if_present("s3://elsewhere/k", s3) == b"moto"
    assert not (Path("/elsewhere") / "k").exists()


def test_run_until_steps_until_the_condition_and_names_a_timeout() -> None:
    steps: list[int] = []
    run_until(lambda: len(steps) >= 3, "three steps", 5, lambda: steps.append(1), interval=0.01)
    assert len(steps) == 3
    with pytest.raises(TimeoutError, match="never: not within 0s"):
        run_until(lambda: False, "never", 0, interval=0.01)
