"""Kinesis I/O for the ``python-kinesis`` source: every call bounded.

boto3's own retries are switched off (``retries=0``: one attempt) and replaced by
one explicit loop, :func:`call_with_backoff`, so the number of attempts and the
longest wait are exactly what the options say (``kinesis.clientNumRetries``,
``kinesis.clientRetryIntervalsMs``, ``kinesis.clientMaxRetryIntervalMs``) and the
logic is testable with a stub client. Throttling
(``ProvisionedThroughputExceededException``, ``LimitExceededException``) and
transport errors back off with full jitter; anything else fails at once.

An expired shard iterator (they live 5 minutes) is re-acquired
``AFTER_SEQUENCE_NUMBER`` of the last record seen, so no record is skipped or
repeated.

Where a read stops (GetRecords API reference,
https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html):
``MillisBehindLatest == 0`` means "caught up, no new records at this moment",
so an open shard's batch ends on that page, without one more (empty) call.
``NextShardIterator`` null means the shard is closed and returns no more data.
moto keeps returning an iterator on a closed shard, so an *empty* answer at
``MillisBehindLatest == 0`` on a shard ListShards reports closed counts as its
end too; a closed shard is never declared finished on a page that still had
records (moto truncates MillisBehindLatest to whole milliseconds, so it can be
0 with records left).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache, partial
from typing import Any, Final, TypeVar

from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.exceptions import HTTPClientError

from job.sources.kinesis_options import ReaderOptions
from model.aws_clients import ClientLimits, client
from model.kinesis_offsets import ShardInfo, ShardState, sequence_key

RETRYABLE_CODES: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
        "ThrottlingException",
        "KMSThrottlingException",
        "InternalFailure",
        "ServiceUnavailable",
    }
)
EXPIRED_ITERATOR: Final = "ExpiredIteratorException"
# Re-acquisitions of an expired iterator allowed for one GetRecords call.
_MAX_REACQUIRE: Final = 3
# A replayed batch's read may take this many times kinesis.maxFetchTimePerShardSec:
# it re-reads what the first read found within that budget.
READ_DEADLINE_FACTOR: Final = 6

T = TypeVar("T")


class DataLossError(RuntimeError):
    """Records a batch must contain are gone (expired or the shard vanished)."""


def error_code(exc: BaseException) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):
        code = response.get("Error", {}).get("Code")
        return str(code) if code else None
    return None


def is_retryable(exc: BaseException) -> bool:
    if error_code(exc) in RETRYABLE_CODES:
        return True
    return isinstance(exc, BotoConnectionError | HTTPClientError)


@dataclass(frozen=True)
class Backoff:
    retries: int
    base_ms: int
    max_ms: int

    def delay_sec(self, attempt: int, rand: Callable[[], float]) -> float:
        """Full jitter: uniform in [0, min(max, base * 2**attempt)]."""
        ceiling = min(self.max_ms, self.base_ms * (1 << attempt))
        return rand() * ceiling / 1000.0


def call_with_backoff(
    call: Callable[[], T],
    backoff: Backoff,
    sleep: Callable[[float], None] = time.sleep,
    rand: Callable[[], float] = random.random,
) -> T:
    """``call()``, retried at most ``backoff.retries`` times on throttling or
    transport errors; the last error is raised unchanged."""
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:
            if attempt >= backoff.retries or not is_retryable(exc):
                raise
            sleep(backoff.delay_sec(attempt, rand))
            attempt += 1


@lru_cache(maxsize=8)
def make_client(options: ReaderOptions) -> Any:
    """A Kinesis client with bounded connect/read timeouts and no hidden retries
    (``retries=0``: :func:`call_with_backoff` is the only retry loop).

    One per process and options: an executor's Python worker runs a task per
    batch, and a new client (a session, the service model, the endpoint
    rules) costs tens of milliseconds each time; botocore clients are
    thread-safe."""
    limits = ClientLimits(
        connect_timeout_sec=options.connect_timeout_sec,
        read_timeout_sec=options.read_timeout_sec,
        retries=0,
        max_pool_connections=16,
    )
    return client("kinesis", limits, region=options.region, endpoint_url=options.endpoint_url)


@dataclass(frozen=True)
class Page:
    records: list[dict[str, Any]]
    ended: bool  # no NextShardIterator: a closed shard read to its end
    caught_up: bool  # MillisBehindLatest == 0: nothing newer at this moment

    @property
    def at_tip(self) -> bool:
        """Nothing returned and nothing behind: the shard holds no more now."""
        return self.caught_up and not self.records


@dataclass(frozen=True)
class ShardBatch:
    """What one batch read from one shard: its records, in order, and the
    shard's state after them (the batch's end offset for this shard)."""

    records: list[dict[str, Any]]
    state: ShardState
    # The read stopped because the shard had nothing newer (not on a record or
    # time bound): the driver probes before it plans another batch.
    caught_up: bool = True


@dataclass(frozen=True)
class Probe:
    """A probe's answer: a batch would read something (records, or a closed
    shard's end), and the iterator to probe from next time if not."""

    has_data: bool
    iterator: str | None


@dataclass
class _Cursor:
    """A position in one shard that survives iterator expiry."""

    kinesis: ShardReader
    shard_id: str
    start: ShardState
    last: str | None = None
    iterator: str | None = None
    last_call: float | None = field(default=None)

    def fetch(self, limit: int) -> Page:
        reader = self.kinesis
        for _ in range(_MAX_REACQUIRE + 1):
            if self.iterator is None:
                self.iterator = reader.acquire_iterator(self.shard_id, self.start, self.last)
            reader.pace(self.last_call)
            iterator = self.iterator
            try:
                response = reader.call(
                    partial(reader.client.get_records, ShardIterator=iterator, Limit=limit)
                )
            except Exception as exc:
                if error_code(exc) == EXPIRED_ITERATOR:
                    self.iterator = None
                    continue
                raise
            finally:
                self.last_call = reader.clock()
            records = list(response.get("Records") or [])
            if records:
                self.last = str(records[-1]["SequenceNumber"])
            self.iterator = response.get("NextShardIterator")
            behind = int(response.get("MillisBehindLatest") or 0)
            return Page(records, self.iterator is None, behind == 0)
        raise RuntimeError(
            f"shard {self.shard_id}: iterator expired {_MAX_REACQUIRE + 1} times in a row"
        )


@dataclass(eq=False)
class ShardReader:
    """Reads shards of one stream through an injected boto3-like client."""

    client: Any
    options: ReaderOptions
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    rand: Callable[[], float] = random.random
    backoff: Backoff = field(init=False)

    def __post_init__(self) -> None:
        self.backoff = Backoff(
            self.options.client_num_retries,
            self.options.client_retry_interval_ms,
            self.options.client_max_retry_interval_ms,
        )

    def call(self, call: Callable[[], T]) -> T:
        return call_with_backoff(call, self.backoff, self.sleep, self.rand)

    def pace(self, last_call: float | None) -> None:
        """Keep kinesis.getRecords.fetchIntervalMs between calls on one shard
        (Kinesis allows 5 GetRecords per second per shard)."""
        if last_call is None or self.options.fetch_interval_ms == 0:
            return
        wait = self.options.fetch_interval_ms / 1000.0 - (self.clock() - last_call)
        if wait > 0:
            self.sleep(wait)

    def list_shards(self) -> list[ShardInfo]:
        stream = self.options.stream_name
        response = self.call(lambda: self.client.list_shards(StreamName=stream))
        shards = [ShardInfo.from_api(raw) for raw in response.get("Shards", [])]
        token = response.get("NextToken")
        while token:
            page = self.call(partial(self.client.list_shards, NextToken=token))
            shards.extend(ShardInfo.from_api(raw) for raw in page.get("Shards", []))
            token = page.get("NextToken")
        return shards

    def acquire_iterator(self, shard_id: str, start: ShardState, last: str | None) -> str:
        args: dict[str, Any] = {"StreamName": self.options.stream_name, "ShardId": shard_id}
        after = last if last is not None else start.after
        if after is not None:
            args.update(ShardIteratorType="AFTER_SEQUENCE_NUMBER", StartingSequenceNumber=after)
        elif start.ts is not None:
            args.update(
                ShardIteratorType="AT_TIMESTAMP", Timestamp=datetime.fromtimestamp(start.ts, UTC)
            )
        else:
            args.update(ShardIteratorType="TRIM_HORIZON")
        response = self.call(lambda: self.client.get_shard_iterator(**args))
        return str(response["ShardIterator"])

    def next_batch(self, shard: ShardInfo, start: ShardState) -> ShardBatch:
        """The next batch of ``shard``: at most kinesis.maxFetchRecordsPerShard
        records after ``start``, read within kinesis.maxFetchTimePerShardSec,
        and where it ends. Runs in the executor task that reads the shard."""
        limit = self.options.max_fetch_records_per_shard
        deadline = self.clock() + self.options.max_fetch_time_per_shard_sec
        cursor = _Cursor(self, shard.shard_id, start)
        records: list[dict[str, Any]] = []
        while True:
            page = cursor.fetch(min(self.options.records_per_fetch, limit - len(records)))
            records.extend(page.records)
            if page.ended:
                return ShardBatch(records, start.advanced(cursor.last, done=True))
            if page.at_tip:
                return ShardBatch(records, start.advanced(cursor.last, done=shard.closed))
            if page.caught_up and not shard.closed:
                # An open shard has nothing newer: end the batch on this page.
                return ShardBatch(records, start.advanced(cursor.last, done=False))
            if len(records) >= limit or self.clock() >= deadline:
                return ShardBatch(records, start.advanced(cursor.last, done=False), False)

    def probe(self, shard: ShardInfo, start: ShardState, iterator: str | None) -> Probe:
        """Whether ``shard`` holds anything after ``start``: one GetRecords of
        at most 1 record (how the awslabs connector's ``hasNewData`` decides
        whether to plan a batch). ``iterator`` is a previous empty probe's
        next iterator at the same position, which saves the GetShardIterator
        call on every idle trigger; an expired one is re-acquired."""
        cursor = _Cursor(self, shard.shard_id, start, iterator=iterator)
        page = cursor.fetch(1)
        pending = bool(page.records) or not page.caught_up
        finished = page.ended or (page.at_tip and shard.closed)
        return Probe(pending or finished, None if pending or finished else cursor.iterator)

    def read_range(self, shard_id: str, start: ShardState, end: str) -> Iterator[dict[str, Any]]:
        """The records of ``shard_id`` in ``(start, end]``, in order. Raises
        DataLossError if the shard ends first, TimeoutError past the deadline."""
        stop = sequence_key(end)
        deadline = self.clock() + (self.options.max_fetch_time_per_shard_sec * READ_DEADLINE_FACTOR)
        cursor = _Cursor(self, shard_id, start)
        while True:
            page = cursor.fetch(self.options.records_per_fetch)
            for record in page.records:
                position = sequence_key(str(record["SequenceNumber"]))
                if position > stop:
                    return
                yield record
                if position == stop:
                    return
            if page.ended or page.at_tip:
                raise DataLossError(
                    f"shard {shard_id}: ended at sequence number {cursor.last} before "
                    f"{end}, which this batch must include (records expired?)"
                )
            if self.clock() >= deadline:
                raise TimeoutError(
                    f"shard {shard_id}: could not read up to {end} within "
                    f"{self.options.max_fetch_time_per_shard_sec * READ_DEADLINE_FACTOR}s"
                )
