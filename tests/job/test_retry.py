"""Catalog calls are retried on transient errors only, a bounded number of times."""

from __future__ import annotations

import pytest

from job.retry import is_transient, with_retries
from model.config import CatalogOptions


class _ClientError(Exception):
    """Shaped like botocore's: the error code sits in ``response``."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.response = {"Error": {"Code": code}}


_ClientError.__name__ = "ClientError"


def test_transient_errors_are_retried_a_bounded_number_of_times_with_doubling_waits() -> None:
    options = CatalogOptions(max_attempts=3, retry_wait_sec=1.0)
    calls: list[int] = []
    waits: list[float] = []

    def down() -> None:
        calls.append(1)
        raise ConnectionError("catalog unreachable")

    with pytest.raises(ConnectionError):
        with_retries(down, "load", options, sleep=waits.append)
    assert len(calls) == 3
    assert waits == [1.0, 2.0]


def test_an_error_that_is_not_transient_propagates_at_once() -> None:
    calls: list[int] = []

    def missing() -> None:
        calls.append(1)
        raise KeyError("not transient")

    with pytest.raises(KeyError):
        with_retries(missing, "load", CatalogOptions(max_attempts=5), sleep=lambda _: None)
    assert len(calls) == 1


def test_a_call_that_recovers_returns_its_result() -> None:
    answers = iter([TimeoutError("slow"), "table"])

    def flaky() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert with_retries(flaky, "load", CatalogOptions(), sleep=lambda _: None) == "table"


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (_ClientError("ThrottlingException"), True),
        (_ClientError("ServiceUnavailable"), True),
        (_ClientError("EntityNotFoundException"), False),
        (type("OperationalError", (Exception,), {})("database is locked"), True),
        (ValueError("bad"), False),
    ],
)
def test_which_errors_are_transient(error: Exception, transient: bool) -> None:
    assert is_transient(error) is transient
