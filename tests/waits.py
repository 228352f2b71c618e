"""The tests' wait: :func:`model.polling.poll_until` with the one timeout
error every test reports, so a test waits on a condition the way the job does
and never sleeps a fixed time hoping the condition holds by then."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from model.polling import poll_until

T = TypeVar("T")


def poll(
    check: Callable[[], T],
    what: str | Callable[[], str],
    timeout: float,
    interval: float = 0.5,
) -> T:
    """The first truthy result of ``check()``; ``TimeoutError`` naming ``what``
    when none came within ``timeout`` seconds (``what`` may be a function, read
    at the timeout, to say how far the wait got). An exception from ``check``,
    such as an assertion that the job still runs, ends the wait at once."""

    def timed_out() -> TimeoutError:
        awaited = what() if callable(what) else what
        return TimeoutError(f"{awaited}: not within {timeout:.0f}s")

    return poll_until(check, timeout=timeout, interval=interval, on_timeout=timed_out)
