"""A lease whose renewals follow a script, and a keeper run until it gives up.

Shared by the lease tests and the job's supervise tests: both need a
:class:`~model.lease.LeaseKeeper` that has reported its lease lost, without S3.
"""

from __future__ import annotations

from collections.abc import Sequence

from model.lease import LeaseKeeper


class ScriptedLease:
    """Renews every 10 ms; renewal ``n`` (from 1) raises ``script[n - 1]``, or
    succeeds once the script is used up."""

    owner = "me"
    renew_interval_sec = 0.01

    def __init__(self, script: Sequence[BaseException | None]) -> None:
        self.script = list(script)
        self.renewals = 0

    def acquire(self, wait_sec: float) -> None:
        pass

    def renew(self) -> None:
        self.renewals += 1
        if self.renewals <= len(self.script):
            error = self.script[self.renewals - 1]
            if error is not None:
                raise error

    def release(self) -> None:
        pass


def keeper_that_lost(lease: ScriptedLease) -> LeaseKeeper:
    """Starts a keeper on ``lease`` and returns it, stopped, once it reported the
    lease lost (at most 10 s: the script must end in a LeaseLostError)."""
    keeper = LeaseKeeper(lease)
    keeper.start()
    try:
        if not keeper.lost.wait(timeout=10):
            raise AssertionError(f"the keeper never reported the lease lost ({lease.renewals})")
    finally:
        keeper.stop()
    return keeper
