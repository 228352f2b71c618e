"""Every AWS client, job and tools alike, made in one place with bounded calls.

docs/design.md, "Incidents": every external call has a bounded timeout and bounded retries.
A :class:`ClientLimits` says how long one call may take to connect and to
read, and how many times botocore retries it (standard retry mode, so
throttling and transport errors back off with jitter). :func:`client` is the
only place a botocore ``Config`` is built.

Where the job's configuration carries the bounds, the caller builds the
limits from it (``metrics.timeout_sec``/``metrics.max_attempts`` for
CloudWatch, ``kinesis.*TimeoutSec`` for the Python source, which does its own
retries). The calls the configuration has no setting for use the constants
below.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import boto3
from botocore.config import Config


@dataclass(frozen=True)
class ClientLimits:
    """Bounds of one AWS call.

    ``retries`` is how many times botocore re-sends a failed call after the
    first attempt (botocore's ``retries.max_attempts``; 0: one attempt only,
    for callers that retry themselves). ``max_pool_connections`` caps the
    client's HTTP pool (None: botocore's default, 10).
    """

    connect_timeout_sec: float
    read_timeout_sec: float
    retries: int
    max_pool_connections: int | None = None

    def __post_init__(self) -> None:
        for name in ("connect_timeout_sec", "read_timeout_sec"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"{name}: must be > 0 (a bounded timeout), got {value}")
        if self.retries < 0:
            raise ValueError(f"retries: must be >= 0, got {self.retries}")
        if self.max_pool_connections is not None and self.max_pool_connections < 1:
            raise ValueError(
                f"max_pool_connections: must be >= 1 or None, got {self.max_pool_connections}"
            )

    def botocore_config(self) -> Any:
        """The ``botocore.config.Config`` these limits stand for."""
        extra: dict[str, Any] = {}
        if self.max_pool_connections is not None:
            extra["max_pool_connections"] = self.max_pool_connections
        return Config(
            connect_timeout=self.connect_timeout_sec,
            read_timeout=self.read_timeout_sec,
            retries={"max_attempts": self.retries, "mode": "standard"},
            **extra,
        )


# The job's S3 calls (config file, lease, stop marker): the config has no setting.
JOB_S3: Final = ClientLimits(connect_timeout_sec=10, read_timeout_sec=10, retries=3)
# The claim-check store's puts from the executors (and the reprocess command's
# gets): an original is at most a few MiB, so 30 s to read an answer is ample;
# a put that still fails fails the task and the batch is replayed.
FAILURE_STORE_S3: Final = ClientLimits(connect_timeout_sec=5, read_timeout_sec=30, retries=3)
# The MSK bootstrap-broker lookup at job start (the config has no setting).
MSK_LOOKUP: Final = ClientLimits(connect_timeout_sec=5, read_timeout_sec=10, retries=3)
# The events table's Glue catalog calls: a bounded wait each, and botocore's
# own retries on top of the job's (``catalog.max_attempts``, job.retry).
GLUE_CATALOG: Final = ClientLimits(connect_timeout_sec=5, read_timeout_sec=20, retries=2)

_CREDENTIAL_NAMES: Final = frozenset(
    {"aws_access_key_id", "aws_secret_access_key", "aws_session_token"}
)


def client(
    service: str,
    limits: ClientLimits,
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    credentials: Mapping[str, str] | None = None,
) -> Any:
    """A boto3 client for ``service`` whose every call is bounded by ``limits``.

    Each client gets its own ``boto3.session.Session`` (creating clients from
    the shared default session is not thread-safe; executors and the harness
    create them from several threads). ``credentials`` takes boto3's keyword
    names (``aws_access_key_id`` ...), e.g. the emulators' fake ones; without,
    boto3's default chain applies.
    """
    pinned = dict(credentials or {})
    unknown = sorted(set(pinned) - _CREDENTIAL_NAMES)
    if unknown:
        raise ValueError(
            f"credentials: {unknown[0]!r} is not one of {', '.join(sorted(_CREDENTIAL_NAMES))}"
        )
    return boto3.session.Session().client(
        service,
        region_name=region,
        endpoint_url=endpoint_url,
        config=limits.botocore_config(),
        **pinned,
    )
