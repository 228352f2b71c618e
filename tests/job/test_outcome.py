"""``job.outcome``: the process status per platform, and the exit record an
:class:`~job.outcome.Outcome` makes of an exit code."""

from __future__ import annotations

import pytest

from infra.serverless_job_run import PLATFORM_ARGUMENTS
from job.outcome import (
    EXIT_BAD_CONFIG,
    EXIT_LEASE_HELD,
    EXIT_LEASE_LOST,
    EXIT_OK,
    EXIT_QUERY_FAILED,
    Outcome,
    Platform,
    process_status,
)
from model import contract


@pytest.mark.parametrize("code", [EXIT_OK, 1, EXIT_LEASE_HELD, 4])
def test_on_serverless_every_other_code_is_the_process_status(code: int) -> None:
    """A failed batch, a lease held or lost still fail the run (the service
    retries it within its budget); a stop on request stays 0."""
    assert process_status(code, "serverless") == code
    assert process_status(code, "emr") == code
    assert process_status(EXIT_BAD_CONFIG, "serverless") == EXIT_OK


def test_the_serverless_job_run_names_a_platform_the_job_knows() -> None:
    """infra cannot import the job: the entry-point arguments it writes must
    name a member of :class:`Platform` (the one exit 2 becomes status 0 on)."""
    flag, value = PLATFORM_ARGUMENTS
    assert flag == "--platform"
    assert Platform(value) is Platform.SERVERLESS
    assert process_status(EXIT_BAD_CONFIG, Platform(value)) == EXIT_OK


def test_an_outcome_without_a_reason_records_the_reason_of_its_code() -> None:
    assert Outcome().record(EXIT_LEASE_LOST).reason == contract.EXIT_LEASE_LOST
    assert Outcome().record(EXIT_OK).reason == contract.EXIT_STOPPED_ON_REQUEST
    assert Outcome().record(99).reason == contract.EXIT_BATCH_FAILED, "an unknown code"


def test_only_a_stop_on_request_records_who_asked() -> None:
    asked = Outcome()
    asked.set(contract.EXIT_STOPPED_ON_REQUEST, "stop marker", "alice")
    record = asked.record(EXIT_OK)
    assert (record.code, record.stopped_by, record.detail) == (EXIT_OK, "alice", "stop marker")
    failed = Outcome()
    failed.set(contract.EXIT_BATCH_FAILED, "boom", "alice")
    assert failed.record(EXIT_QUERY_FAILED).stopped_by is None
