"""Retry an action on transient errors, a bounded number of times.

The catalog calls (open, load, refresh, evolve, commit) go through
:func:`with_retries`: docs/design.md, "Incidents", every external call has a
bounded timeout and bounded retries. The bounds come from the caller's
settings (a :class:`RetryPolicy`, e.g. ``JobConfig.catalog``); the last error
propagates, so a batch whose catalog stays unreachable fails and is replayed
from the same offsets. Waiting until a condition holds is :mod:`model.polling`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# Errors by type name, so this module imports neither botocore nor SQLAlchemy.
_TRANSIENT_TYPES = frozenset(
    {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "OperationalError",  # SQLAlchemy: database is locked / unreachable
        "ThrottlingException",
    }
)
# botocore ClientError codes of a busy or briefly unavailable service.
_TRANSIENT_CODES = frozenset(
    {"ThrottlingException", "InternalServiceException", "ServiceUnavailable"}
)


class RetryPolicy(Protocol):
    """How often and how patiently (``JobConfig.catalog`` is one)."""

    @property
    def max_attempts(self) -> int: ...

    @property
    def retry_wait_sec(self) -> float: ...


def is_transient(exc: BaseException) -> bool:
    """An error worth retrying: the network, a throttle, a busy SQLite file.
    A missing table or a rejected commit is not."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    name = type(exc).__name__
    if name in _TRANSIENT_TYPES:
        return True
    if name != "ClientError":
        return False
    return getattr(exc, "response", {}).get("Error", {}).get("Code") in _TRANSIENT_CODES


def with_retries(
    action: Callable[[], T],
    what: str,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``action()``, retried on transient errors at most ``policy.max_attempts``
    times in all, waiting ``retry_wait_sec`` doubled each time. The last error
    propagates."""
    for attempt in range(1, policy.max_attempts + 1):
        try:
            return action()
        except Exception as exc:
            if attempt == policy.max_attempts or not is_transient(exc):
                raise
            wait = policy.retry_wait_sec * 2 ** (attempt - 1)
            log.warning(
                "%s failed (attempt %d of %d), retrying in %.1fs: %s",
                what,
                attempt,
                policy.max_attempts,
                wait,
                exc,
            )
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover
