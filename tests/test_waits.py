"""tests.waits: the tests' one wait returns what the condition found, and a
timeout names what was awaited."""

from __future__ import annotations

import pytest

from tests.waits import poll


def test_returns_the_first_truthy_result() -> None:
    results = iter([None, [], ["row"]])
    assert poll(lambda: next(results), "rows", timeout=5, interval=0) == ["row"]


def test_a_timeout_names_what_was_awaited() -> None:
    checks: list[int] = []
    with pytest.raises(TimeoutError, match=r"^first batch committed: not within 0s$"):
        poll(lambda: checks.append(1), "first batch committed", timeout=0)
    assert checks == [1], "timeout=0 is one check"


def test_a_timeout_can_say_how_far_the_wait_got() -> None:
    seen: list[int] = []
    with pytest.raises(TimeoutError, match=r"^3 of 5 rows: not within 0s$"):
        poll(lambda: seen.extend([1, 2, 3]), lambda: f"{len(seen)} of 5 rows", timeout=0)


def test_an_error_in_the_check_ends_the_wait() -> None:
    def job_ended() -> bool:
        raise AssertionError("run() returned early with 3")

    with pytest.raises(AssertionError, match="returned early"):
        poll(job_ended, "all rows", timeout=60)
