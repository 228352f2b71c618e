"""The one PutRecords writer: the sample producer and ``reprocess`` both put through it.

PutRecords
(https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecords.html)
takes at most 500 records per request, each record (data + partition key) up
to 1 MiB, and at most 5 MiB for the whole request, partition keys included.
(The current page also allows 10 MiB per request on a stream whose maximum
record size was raised, https://docs.aws.amazon.com/streams/latest/dev/large-records.html;
5 MiB fits either.) :func:`chunks` cuts a sequence of entries into requests
within those limits.

A response is not all-or-nothing: it can store some entries and refuse others
(``FailedRecordCount`` and a per-entry ``ErrorCode``, either
``ProvisionedThroughputExceededException`` or ``InternalFailure``; a stored
entry has ``ShardId`` and ``SequenceNumber``,
https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecordsResultEntry.html).
:func:`put_entries` re-sends only the refused entries, after an exponential
backoff, up to ``max_attempts`` calls, and returns what is still refused with
the last error: the caller decides (the producer stops, ``reprocess`` holds
its consumer position in front of them). A whole call refused for throughput
(``ProvisionedThroughputExceededException`` or ``KMSThrottlingException``,
both listed on the PutRecords page; botocore has already retried it within
the client's bounded budget) counts as one attempt for every entry. Any other
error of the call (no such stream, no permission) is not something a retry
fixes: it raises :class:`KinesisCallError`.

An :class:`Entry` carries, besides its bytes and key, whatever its caller
needs back (``source``): the failure record for ``reprocess``, the sample
records of a (KPL-aggregated) entry for the producer. Each stored entry comes
back with its shard and sequence number (:class:`Stored`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

MAX_RECORDS_PER_CALL: Final = 500
MAX_BYTES_PER_CALL: Final = 5 * 1024 * 1024
MAX_RECORD_BYTES: Final = 1024 * 1024
# Call-level errors worth another attempt: the stream's (or its KMS key's)
# throughput (the PutRecords page above lists both).
THROTTLING_CODES: Final = frozenset(
    {"ProvisionedThroughputExceededException", "KMSThrottlingException"}
)
ERROR_CODE: Final = "ErrorCode"
SEQUENCE_NUMBER: Final = "SequenceNumber"
SHARD_ID: Final = "ShardId"
# PutRecords calls per request before its still-refused entries count as failed.
DEFAULT_MAX_ATTEMPTS: Final = 8
_BACKOFF_BASE_SEC: Final = 0.1
_BACKOFF_CAP_SEC: Final = 5.0

T = TypeVar("T")


class PutLimitError(ValueError):
    """A request size outside PutRecords' limits, or an entry no request can hold."""


class UnreadableResponseError(ValueError):
    """A PutRecords response that does not say which entries were stored."""


class KinesisCallError(RuntimeError):
    """A PutRecords call failed for a reason a retry does not fix."""


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One PutRecords entry, and what its caller needs back (``source``)."""

    data: bytes
    partition_key: str
    source: T

    @property
    def size(self) -> int:
        """What counts against the limits: data plus the partition key."""
        return len(self.data) + len(self.partition_key.encode())

    def request(self) -> dict[str, Any]:
        return {"Data": self.data, "PartitionKey": self.partition_key}


@dataclass(frozen=True)
class Stored(Generic[T]):
    """An entry Kinesis stored, and where."""

    entry: Entry[T]
    shard_id: str
    sequence_number: str


@dataclass(frozen=True)
class Split(Generic[T]):
    """A PutRecords response laid over its request."""

    stored: list[Stored[T]]
    failed: list[Entry[T]]
    errors: list[str]  # one per failed entry: "ErrorCode: ErrorMessage"

    @property
    def accepted(self) -> list[Entry[T]]:
        return [s.entry for s in self.stored]


@dataclass
class PutOutcome(Generic[T]):
    """What became of one request's entries after every attempt."""

    stored: list[Stored[T]] = field(default_factory=list)
    failed: list[Entry[T]] = field(default_factory=list)
    last_error: str = ""
    calls: int = 0
    retried_entries: int = 0

    @property
    def accepted(self) -> list[Entry[T]]:
        return [s.entry for s in self.stored]


def chunks(
    entries: Iterable[Entry[T]],
    *,
    max_records: int = MAX_RECORDS_PER_CALL,
    max_bytes: int = MAX_BYTES_PER_CALL,
) -> Iterator[list[Entry[T]]]:
    """PutRecords requests in input order: each at most ``max_records`` entries
    and ``max_bytes`` (data + partition keys). Lazy: a request is yielded as
    soon as it is full, or the next entry would not fit, or the input ends."""
    if not 1 <= max_records <= MAX_RECORDS_PER_CALL:
        raise PutLimitError(f"max_records={max_records}: must be 1..{MAX_RECORDS_PER_CALL}")
    current: list[Entry[T]] = []
    size = 0
    for entry in entries:
        if entry.size > max_bytes:
            raise PutLimitError(
                f"entry with partition key {entry.partition_key!r}: {entry.size} bytes > "
                f"{max_bytes} (one request's limit)"
            )
        if current and size + entry.size > max_bytes:
            yield current
            current, size = [], 0
        current.append(entry)
        size += entry.size
        if len(current) == max_records:
            yield current
            current, size = [], 0
    if current:
        yield current


def split_response(pending: Sequence[Entry[T]], response: Mapping[str, Any]) -> Split[T]:
    """Which entries Kinesis stored and which to re-send. Results come in request
    order; an entry failed if it has an ``ErrorCode`` (or no sequence number).
    ``FailedRecordCount`` must agree: a response we cannot read is an error,
    never a success."""
    results = list(response.get("Records") or [])
    if len(results) != len(pending):
        raise UnreadableResponseError(
            f"PutRecords answered {len(results)} results for {len(pending)} records; "
            "cannot tell which were stored"
        )
    stored: list[Stored[T]] = []
    failed: list[Entry[T]] = []
    errors: list[str] = []
    for entry, result in zip(pending, results, strict=True):
        if result.get(ERROR_CODE) or not result.get(SEQUENCE_NUMBER):
            failed.append(entry)
            code = result.get(ERROR_CODE) or "NoSequenceNumber"
            errors.append(f"{code}: {result.get('ErrorMessage', '')}".rstrip(": "))
        else:
            stored.append(Stored(entry, str(result.get(SHARD_ID, "")), result[SEQUENCE_NUMBER]))
    counted = response.get("FailedRecordCount")
    if counted is not None and int(counted) != len(failed):
        raise UnreadableResponseError(
            f"PutRecords FailedRecordCount={counted} but {len(failed)} results carry an "
            "error; cannot tell which were stored"
        )
    return Split(stored, failed, errors)


def backoff_seconds(attempt: int) -> float:
    """Exponential, capped: 0.1, 0.2, 0.4 ... 5 s."""
    return float(min(_BACKOFF_CAP_SEC, _BACKOFF_BASE_SEC * 2 ** (attempt - 1)))


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _call(client: Any, stream: str, pending: list[Entry[T]]) -> Split[T] | str:
    """One PutRecords call: its split, or the whole call's throttling error."""
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
        return f"{code} (whole call): {exc}"
    return split_response(pending, response)


def put_entries(
    client: Any,
    stream: str,
    entries: Sequence[Entry[T]],
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    sleep: Callable[[float], None] = time.sleep,
) -> PutOutcome[T]:
    """Put ``entries`` (one request's worth, :func:`chunks`), re-sending what is
    refused up to ``max_attempts`` calls in all."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts={max_attempts}: must be >= 1")
    outcome: PutOutcome[T] = PutOutcome()
    pending = list(entries)
    for attempt in range(1, max_attempts + 1):
        outcome.calls += 1
        answer = _call(client, stream, pending)
        if isinstance(answer, str):
            outcome.last_error, failed = answer, pending
        else:
            outcome.stored.extend(answer.stored)
            failed = answer.failed
            if answer.errors:
                outcome.last_error = answer.errors[0]
        if not failed:
            return outcome
        if attempt < max_attempts:
            outcome.retried_entries += len(failed)
            pending = failed
            sleep(backoff_seconds(attempt))
        else:
            outcome.failed.extend(failed)
    return outcome
