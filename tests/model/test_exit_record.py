"""The exit record: the job says why it stopped, beside its lease, so the
supervisor and ``make status`` read the reason without parsing logs."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from job import driver
from job.driver import main
from job.outcome import ExitCode, Outcome
from job.query import supervise
from model import contract
from model.checkpoint_state import OldCheckpointError
from model.config import ConfigError
from model.exit_record import (
    ExitRecord,
    ExitRecordError,
    read_exit_record,
    shorten,
    write_exit_record,
)
from model.graceful_stop import StopMarker, StopRequest
from model.lease import FileLease
from tests.job.job_helpers import job_config
from tests.job.test_query import FakeQuery

RECORD = ExitRecord(code=1, reason=contract.EXIT_BATCH_FAILED, detail="boom", at=100.5, owner="h:1")


def test_a_record_round_trips_and_reads_back_from_a_local_checkpoint(tmp_path: Path) -> None:
    checkpoint = str(tmp_path / "checkpoint")
    assert read_exit_record(checkpoint) is None, "no record before the first exit"
    assert write_exit_record(checkpoint, RECORD)
    assert (tmp_path / "checkpoint" / contract.EXIT_RECORD_NAME).exists()
    assert read_exit_record(checkpoint) == RECORD
    assert not list((tmp_path / "checkpoint").glob("*.tmp")), "written whole, then renamed"


@mock_aws
def test_a_record_reads_back_from_s3() -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    bucket = f"cp-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    checkpoint = f"s3://{bucket}/checkpoints/x/"
    assert read_exit_record(checkpoint, s3) is None
    stopped = ExitRecord(
        0, contract.EXIT_STOPPED_ON_REQUEST, "stop marker", 5.0, "h:2", contract.STOP_BY_HANDOVER
    )
    assert write_exit_record(checkpoint, stopped, s3)
    body = s3.get_object(Bucket=bucket, Key="checkpoints/x/_exit")["Body"].read()
    assert json.loads(body)["stopped_by"] == "handover"
    assert read_exit_record(checkpoint, s3) == stopped


def test_a_record_that_cannot_be_written_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert not write_exit_record(str(blocker / "checkpoint"), RECORD)
    assert "could not write the exit record" in caplog.text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ("[1]", "expected a JSON object, got list"),
        ('{"reason": "x", "at": 1}', "field 'code' missing"),
        ('{"code": "x", "reason": "r", "at": 1}', "expected code int"),
    ],
)
def test_a_bad_record_names_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ExitRecordError, match=message):
        ExitRecord.from_json(text, "s3://b/_exit")


def test_detail_is_one_bounded_line() -> None:
    assert shorten("a\n  b\tc") == "a b c"
    long = "head " + "x" * 5_000 + " ValueError: the cause"
    short = shorten(long)
    assert len(short) == 1_005
    assert short.startswith("head ") and short.endswith("ValueError: the cause")


def test_main_records_a_refused_lease(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    config = job_config(database="d", bootstrap="b:1", checkpoint=str(checkpoint))
    raw = {**config.to_dict(), "lease_ttl_sec": 1, "lease_wait_sec": 1}
    (tmp_path / "c.json").write_text(json.dumps(raw), encoding="utf-8")
    holder = FileLease(checkpoint / "_lease", config.instance_id, "first-copy")
    holder.acquire(wait_sec=0)
    try:
        assert main(["--config", str(tmp_path / "c.json")]) == ExitCode.LEASE_HELD
    finally:
        holder.release()
    record = read_exit_record(str(checkpoint))
    assert record is not None
    assert (record.code, record.reason) == (ExitCode.LEASE_HELD, contract.EXIT_LEASE_REFUSED)
    assert "first-copy" in record.detail


def _refused_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> tuple[list[str], Path]:
    """``main``'s arguments for a job whose checkpoint check raises ``error``
    (under the lease), and the job's checkpoint."""
    checkpoint = tmp_path / "checkpoint"
    config = job_config(database="d", bootstrap="b:1", checkpoint=str(checkpoint))
    (tmp_path / "c.json").write_text(config.to_json(), encoding="utf-8")

    def refuse(*_: object) -> None:
        raise error

    monkeypatch.setattr(driver, "checked_checkpoint", refuse)
    return ["--config", str(tmp_path / "c.json")], checkpoint


def test_main_records_a_refused_configuration_under_the_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = ConfigError("stream s: retention is 48 h but dedup_horizon_hours is 24")
    argv, checkpoint = _refused_at_start(tmp_path, monkeypatch, refused)
    assert main(argv) == ExitCode.BAD_CONFIG
    record = read_exit_record(str(checkpoint))
    assert record is not None
    assert (record.code, record.reason) == (ExitCode.BAD_CONFIG, contract.EXIT_CONFIG_REFUSED)
    assert "retention is 48 h" in record.detail


@pytest.mark.parametrize(
    ("body", "by"),
    [
        (b"handover requested 2026-11-26T21:00:00Z", contract.STOP_BY_HANDOVER),
        (b"operator stop requested", contract.STOP_BY_OPERATOR),
        (b"", contract.STOP_BY_OPERATOR),
        (b"stop\n", contract.STOP_BY_OPERATOR),
    ],
)
def test_a_stop_marker_says_who_asked(tmp_path: Path, body: bytes, by: str) -> None:
    path = tmp_path / "stop"
    stop = StopRequest()
    query = FakeQuery(on_poll={1: lambda: path.write_bytes(body)})
    outcome = Outcome()
    config = job_config(database="d", bootstrap="b:1", trigger_interval_sec=1)
    assert supervise(query, config, stop=stop, marker=StopMarker(str(path)), outcome=outcome) == (
        ExitCode.OK
    )
    record = outcome.record(ExitCode.OK)
    assert (record.reason, record.stopped_by) == (contract.EXIT_STOPPED_ON_REQUEST, by)


def test_a_failed_query_is_recorded_with_its_cause() -> None:
    query = FakeQuery(await_raises=RuntimeError("batch 7 failed: kafka down"))
    outcome = Outcome()
    config = job_config(database="d", bootstrap="b:1", trigger_interval_sec=1)
    code = supervise(query, config, stop=StopRequest(), outcome=outcome)
    record = outcome.record(code)
    assert (record.code, record.reason) == (1, contract.EXIT_BATCH_FAILED)
    assert "kafka down" in record.detail
    assert record.stopped_by is None


def test_on_serverless_a_refused_configuration_ends_with_status_0_and_records_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMR Serverless retries a failed run, not a successful one: exit 2 must
    not fail the run there, and the record still says 2 (job.outcome.process_status)."""
    refused = OldCheckpointError("checkpoint c: holds dropDuplicatesWithinWatermark state")
    argv, checkpoint = _refused_at_start(tmp_path, monkeypatch, refused)
    assert main([*argv, "--platform", "serverless"]) == ExitCode.OK
    record = read_exit_record(str(checkpoint))
    assert record is not None
    assert (record.code, record.reason) == (ExitCode.BAD_CONFIG, contract.EXIT_CHECKPOINT_REFUSED)
    # The same refusal on EMR (default and explicit) keeps its status 2.
    assert main(argv) == ExitCode.BAD_CONFIG
    assert main([*argv, "--platform", "emr"]) == ExitCode.BAD_CONFIG


def test_on_serverless_an_unreadable_configuration_ends_with_status_0(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.json")
    assert main(["--config", missing, "--platform", "serverless"]) == ExitCode.OK
    assert main(["--config", missing]) == ExitCode.BAD_CONFIG


def test_an_unknown_platform_is_refused_naming_the_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["--config", str(tmp_path / "c.json"), "--platform", "glue"])
    assert "choose from 'emr', 'serverless'" in capsys.readouterr().err
