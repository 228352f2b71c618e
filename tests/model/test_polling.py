"""The one poll loop: bounded by its timeout, checks at least once, never sleeps
past the deadline, and lets the caller's own error and exceptions through."""

from __future__ import annotations

import time

import pytest

from model.polling import poll_until, wait_for
from tests.fake_clock import FakeClock


def test_returns_the_first_truthy_result_without_sleeping_after_it() -> None:
    fake = FakeClock(now=100.0)
    answers = iter([None, 0, "ready", "never asked"])
    result = wait_for(lambda: next(answers), timeout=10, interval=1, clock=fake, sleep=fake.sleep)
    assert result == "ready"
    assert fake.slept == [1, 1]


def test_gives_up_at_the_deadline_and_never_sleeps_past_it() -> None:
    fake = FakeClock(now=100.0)
    checks: list[float] = []

    def never() -> bool:
        checks.append(fake.now)
        return False

    assert wait_for(never, timeout=2.5, interval=1, clock=fake, sleep=fake.sleep) is False
    assert fake.slept == [1, 1, 0.5], "the last sleep is cut to the deadline"
    assert checks == [100.0, 101.0, 102.0, 102.5], "one last check at the deadline"


def test_slow_checks_count_against_the_timeout() -> None:
    fake = FakeClock(now=100.0)

    def slow() -> bool:
        fake.now += 3  # a check that takes 3 s
        return False

    wait_for(slow, timeout=5, interval=1, clock=fake, sleep=fake.sleep)
    assert fake.now - 100.0 <= 5 + 3, "at most the timeout plus one check"


def test_zero_timeout_is_one_check() -> None:
    fake = FakeClock(now=100.0)
    calls: list[int] = []
    assert not wait_for(
        lambda: calls.append(1), timeout=0, interval=1, clock=fake, sleep=fake.sleep
    )
    assert calls == [1]
    assert fake.slept == []


def test_poll_until_raises_the_callers_error_with_what_it_saw() -> None:
    fake = FakeClock(now=100.0)
    seen: list[int] = []

    def count() -> bool:
        seen.append(len(seen))
        return False

    with pytest.raises(LookupError, match="after 4 checks"):
        poll_until(
            count,
            timeout=3,
            interval=1,
            on_timeout=lambda: LookupError(f"after {len(seen)} checks"),
            clock=fake,
            sleep=fake.sleep,
        )


def test_poll_until_returns_the_result_and_lets_check_errors_through() -> None:
    fake = FakeClock(now=100.0)
    assert poll_until(lambda: 42, timeout=1, interval=1, on_timeout=AssertionError) == 42

    def broken() -> bool:
        raise RuntimeError("query failed")

    with pytest.raises(RuntimeError, match="query failed"):
        poll_until(
            broken,
            timeout=5,
            interval=1,
            on_timeout=AssertionError,
            clock=fake,
            sleep=fake.sleep,
        )
    assert fake.slept == []


def test_real_clock_wait_is_bounded() -> None:
    started = time.monotonic()
    assert wait_for(lambda: False, timeout=0.2, interval=0.05) is False
    assert 0.2 <= time.monotonic() - started < 1.0


@pytest.mark.parametrize(("timeout", "interval"), [(-1, 1), (1, -1)])
def test_negative_bounds_are_rejected(timeout: float, interval: float) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        wait_for(lambda: True, timeout=timeout, interval=interval)
