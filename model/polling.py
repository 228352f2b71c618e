"""Wait, bounded, until a condition holds: the one poll loop of the job and its tools.

:func:`wait_for` checks a condition every ``interval`` seconds until it holds
or ``timeout`` has passed, and returns the last result (so the caller decides
what a timeout means: the lease raises its own error, a graceful stop stops
anyway). :func:`poll_until` is the same wait that raises on timeout.

The condition is always checked at least once (``timeout=0`` is one check), the
last check happens at or after the deadline, and no sleep runs past the
deadline: a wait takes at most ``timeout`` plus the time of one check. An
exception raised by the condition ends the wait and propagates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    condition: Callable[[], T],
    *,
    timeout: float,
    interval: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """The first truthy result of ``condition()``, or its last (falsy) result
    once ``timeout`` seconds have passed."""
    if timeout < 0:
        raise ValueError(f"timeout: must be >= 0, got {timeout}")
    if interval < 0:
        raise ValueError(f"interval: must be >= 0, got {interval}")
    deadline = clock() + timeout
    while True:
        result = condition()
        if result:
            return result
        remaining = deadline - clock()
        if remaining <= 0:
            return result
        sleep(min(interval, remaining))


def poll_until(
    condition: Callable[[], T],
    *,
    timeout: float,
    interval: float,
    on_timeout: Callable[[], BaseException],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """:func:`wait_for`, raising ``on_timeout()`` when the condition did not
    hold in time (a closure: the message can say how far the wait got)."""
    result = wait_for(condition, timeout=timeout, interval=interval, clock=clock, sleep=sleep)
    if not result:
        raise on_timeout()
    return result
