"""Put one request's records on the instance's stream, re-sending only what failed.

PutRecords is not all-or-nothing: a response can store some entries and
refuse others (``FailedRecordCount`` and a per-entry ``ErrorCode``,
https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecords.html).
Only the refused entries go again, after an exponential backoff, up to
``max_attempts`` calls; what is still refused then is returned as failed, with
the last error, for the caller to report (and to hold its consumer position
in front of). A whole call refused for throughput
(``ProvisionedThroughputExceededException``, also listed on that page; botocore
has already retried it within the client's bounded budget) counts as one
attempt for every entry. Any other error of the call (no such stream, no
permission) is not something a retry fixes: it propagates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ops.producer import backoff_seconds, kinesis_client
from scripts.reprocess.plan import Entry, split_response

DEFAULT_MAX_ATTEMPTS: Final = 10
# Call-level errors worth another attempt: the stream's (or its KMS key's)
# throughput. PutRecords lists both among its errors (page above).
THROTTLING_CODES: Final = frozenset(
    {"ProvisionedThroughputExceededException", "KMSThrottlingException"}
)


class KinesisCallError(RuntimeError):
    """A PutRecords call failed for a reason a retry does not fix."""


@dataclass
class PutOutcome:
    """What became of one request's entries after every attempt."""

    accepted: list[Entry] = field(default_factory=list)
    failed: list[Entry] = field(default_factory=list)
    last_error: str = ""
    calls: int = 0
    retried_entries: int = 0


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def put_entries(
    client: Any,
    stream: str,
    entries: Sequence[Entry],
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> PutOutcome:
    """Put ``entries`` (one request's worth: <= 500 records, <= 5 MiB)."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts={max_attempts}: must be >= 1")
    outcome = PutOutcome()
    pending = list(entries)
    for attempt in range(1, max_attempts + 1):
        outcome.calls += 1
        try:
            response = client.put_records(
                StreamName=stream, Records=[entry.request() for entry in pending]
            )
        except Exception as exc:
            code = _error_code(exc)
            if code not in THROTTLING_CODES:
                raise KinesisCallError(
                    f"PutRecords on stream {stream} failed ({code or type(exc).__name__}): {exc}"
                ) from exc
            outcome.last_error = f"{code} (whole call): {exc}"
            failed = pending
        else:
            split = split_response(pending, response)
            outcome.accepted.extend(split.accepted)
            failed = split.failed
            if split.errors:
                outcome.last_error = split.errors[0]
        if not failed:
            return outcome
        if attempt < max_attempts:
            outcome.retried_entries += len(failed)
            pending = failed
            sleep(backoff_seconds(attempt))
        else:
            outcome.failed.extend(failed)
    return outcome


def stream_client(region: str, endpoint_url: str | None) -> Any:
    """The producer's Kinesis client (bounded timeouts and retries), default credentials."""
    return kinesis_client(region, endpoint_url)
