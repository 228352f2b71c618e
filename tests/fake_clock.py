"""The tests' clock: time moves only when the code under test sleeps or the
test moves ``now`` itself. Passed where the code takes a ``clock`` (it is
callable) and a ``sleep``."""

from __future__ import annotations


class FakeClock:
    """Seconds since an epoch of the test's choosing; every sleep is recorded."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
