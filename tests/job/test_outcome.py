"""``job.outcome``: the process status per platform, and the exit record an
:class:`~job.outcome.Outcome` makes of an exit code."""

from __future__ import annotations

import pytest

from infra.serverless.job_run import PLATFORM_ARGUMENTS
from job.outcome import ExitCode, Outcome, Platform, process_status
from model import contract


@pytest.mark.parametrize("code", [c for c in ExitCode if c is not ExitCode.BAD_CONFIG])
def test_on_serverless_every_other_code_is_the_process_status(code: ExitCode) -> None:
    """A failed batch, a lease held or lost still fail the run (the service
    retries it within its budget); a stop on request stays 0."""
    assert process_status(code, "serverless") == code
    assert process_status(code, "emr") == code
    assert process_status(ExitCode.BAD_CONFIG, "serverless") == ExitCode.OK


def test_the_serverless_job_run_names_a_platform_the_job_knows() -> None:
    """infra cannot import the job: the entry-point arguments it writes must
    name a member of :class:`Platform` (the one exit 2 becomes status 0 on)."""
    flag, value = PLATFORM_ARGUMENTS
    assert flag == "--platform"
    assert Platform(value) is Platform.SERVERLESS
    assert process_status(ExitCode.BAD_CONFIG, Platform(value)) == ExitCode.OK


def test_an_outcome_without_a_reason_records_the_reason_of_its_code() -> None:
    """Every code has its reason: a code added without one fails here."""
    assert {code: Outcome().record(code).reason for code in ExitCode} == {
        ExitCode.OK: contract.EXIT_STOPPED_ON_REQUEST,
        ExitCode.QUERY_FAILED: contract.EXIT_BATCH_FAILED,
        ExitCode.BAD_CONFIG: contract.EXIT_CONFIG_REFUSED,
        ExitCode.LEASE_HELD: contract.EXIT_LEASE_REFUSED,
        ExitCode.LEASE_LOST: contract.EXIT_LEASE_LOST,
    }


def test_an_exit_code_is_the_process_status_and_the_record_holds_a_plain_int() -> None:
    """sys.exit and the JSON exit record take the code as the int it is."""
    record = Outcome().record(ExitCode.LEASE_HELD)
    assert type(record.code) is int
    assert record.code == 3
    assert [int(code) for code in ExitCode] == [0, 1, 2, 3, 4]


def test_only_a_stop_on_request_records_who_asked() -> None:
    asked = Outcome()
    asked.set(contract.EXIT_STOPPED_ON_REQUEST, "stop marker", "alice")
    record = asked.record(ExitCode.OK)
    assert (record.code, record.stopped_by, record.detail) == (ExitCode.OK, "alice", "stop marker")
    failed = Outcome()
    failed.set(contract.EXIT_BATCH_FAILED, "boom", "alice")
    assert failed.record(ExitCode.QUERY_FAILED).stopped_by is None
