"""Put records on a Kinesis stream and account for every one: what
``python -m producer.producer``, ``make produce`` and ``make run`` send with.

:func:`plan_entries` turns sample records into PutRecords entries (up to N
consecutive records packed into one KPL aggregate, :mod:`producer.aggregation`; a
``bad_aggregate`` record always alone), :func:`put_all` sends them paced
through :mod:`producer.kinesis_put` (requests within the API's limits, entries
Kinesis rejects in a call re-sent with a bounded exponential backoff) and
returns the :class:`ProduceReport`: the ids the table must hold, and the key
and reason of every record that must reach the failure topic (the key is the
source coordinate stream/shard/sequence number, and the sub-sequence number
of an aggregate's member, known only after Kinesis accepted the record). A
record that still fails after the last attempt raises :class:`ProduceError`:
a producer that drops records silently would make every count downstream a
lie. :func:`kinesis_client` and :func:`ensure_stream` reach and create the
stream.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from botocore.exceptions import WaiterError

from model import aws_clients
from model.failure_record import record_key
from model.record import BAD_AGGREGATE
from producer import kinesis_put
from producer.aggregation import aggregate
from producer.events import SampleRecord
from producer.kinesis_put import (
    DEFAULT_MAX_ATTEMPTS,
    MAX_RECORDS_PER_CALL,
    Stored,
    chunks,
    put_entries,
)

# Every Kinesis call of the producer: bounded, with botocore's own retries on
# top of the per-entry re-sends below.
PRODUCER_LIMITS: Final = aws_clients.ClientLimits(
    connect_timeout_sec=5, read_timeout_sec=30, retries=5
)
# Stream status checks while waiting for ACTIVE (the StreamExists waiter).
_STREAM_POLL_SEC: Final = 1


class ProduceError(RuntimeError):
    """Records Kinesis kept rejecting after every attempt."""


@dataclass(frozen=True)
class Placed:
    """A record Kinesis accepted, and where it put it; ``sub_sequence_number``
    is its index in the KPL aggregate it went in (None: sent as is)."""

    record: SampleRecord
    shard_id: str
    sequence_number: str
    sub_sequence_number: int | None = None


@dataclass(frozen=True)
class Packed:
    """What one PutRecords entry of the producer carries: one record as is, or
    a KPL aggregate of several (``aggregated``)."""

    members: tuple[SampleRecord, ...]
    aggregated: bool


def _entry(data: bytes, key: str, members: tuple[SampleRecord, ...], aggregated: bool) -> Entry:
    return Entry(data, key, Packed(members, aggregated))


Entry = kinesis_put.Entry[Packed]


@dataclass
class ProduceReport:
    stream: str
    placed: list[Placed] = field(default_factory=list)
    calls: int = 0
    retried_entries: int = 0
    seconds: float = 0.0
    kinesis_records: int = 0
    aggregates: int = 0

    def add(self, stored: Stored[Packed]) -> None:
        """One stored entry: one Kinesis record, and each user record it carries."""
        packed = stored.entry.source
        self.kinesis_records += 1
        self.aggregates += packed.aggregated
        self.placed.extend(
            Placed(
                member,
                stored.shard_id,
                stored.sequence_number,
                index if packed.aggregated else None,
            )
            for index, member in enumerate(packed.members)
        )

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(p.record.kind for p in self.placed).items()))

    def expected_ids(self) -> set[str]:
        return {
            p.record.event_id
            for p in self.placed
            if p.record.event_id is not None and not p.record.is_failure
        }

    def expected_failures(self) -> dict[str, str]:
        """Failure-topic key -> reason, for every malformed record produced.
        Raises if two share a key: the count would hide a lost one."""
        out: dict[str, str] = {}
        for p in self.placed:
            if not p.record.is_failure:
                continue
            key = record_key(self.stream, p.shard_id, p.sequence_number, p.sub_sequence_number)
            if key in out:
                raise ValueError(f"two failure records share the failure key {key}")
            out[key] = p.record.kind
        return out

    def records_by_shard(self) -> dict[str, int]:
        return dict(sorted(Counter(p.shard_id for p in self.placed).items()))

    def last_sequence_by_shard(self) -> dict[str, str]:
        last: dict[str, str] = {}
        for p in self.placed:
            if p.shard_id not in last or int(p.sequence_number) > int(last[p.shard_id]):
                last[p.shard_id] = p.sequence_number
        return last

    def to_dict(self, *, full: bool = True) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "stream": self.stream,
            "records": len(self.placed),
            "kinesis_records": self.kinesis_records,
            "aggregates": self.aggregates,
            "aggregated_records": sum(p.sub_sequence_number is not None for p in self.placed),
            "counts": self.counts(),
            "unique_valid_ids": len(self.expected_ids()),
            "records_by_shard": self.records_by_shard(),
            "calls": self.calls,
            "retried_entries": self.retried_entries,
            "seconds": round(self.seconds, 3),
            "records_per_second": round(len(self.placed) / self.seconds, 1)
            if self.seconds
            else None,
        }
        if full:
            summary["ids"] = sorted(self.expected_ids())
            summary["failures"] = dict(sorted(self.expected_failures().items()))
            summary["last_sequence_by_shard"] = self.last_sequence_by_shard()
        return summary


def plan_entries(
    records: Sequence[SampleRecord], aggregate_size: int = 0, share: float = 1.0
) -> list[Entry]:
    """The PutRecords entries of ``records``, in order: groups of up to
    ``aggregate_size`` consecutive records, ``share`` of the groups packed into
    one KPL aggregate each (deterministic: group k is packed when
    ``floor((k+1)*share) > floor(k*share)``), the others sent record by record.
    A ``bad_aggregate`` record is never packed (it stands for a corrupt
    aggregate itself)."""
    if aggregate_size < 0:
        raise ValueError(f"aggregate={aggregate_size}: must be >= 0")
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"aggregate_share={share}: must be between 0 and 1")
    if aggregate_size == 0:
        return [_entry(r.data, r.partition_key, (r,), False) for r in records]
    entries: list[Entry] = []
    group: list[SampleRecord] = []
    groups = 0

    def flush() -> None:
        nonlocal groups
        if not group:
            return
        packed = math.floor((groups + 1) * share) > math.floor(groups * share)
        groups += 1
        if packed:
            key = group[0].partition_key
            data = aggregate(key, [r.data for r in group])
            entries.append(_entry(data, key, tuple(group), True))
        else:
            entries.extend(_entry(r.data, r.partition_key, (r,), False) for r in group)
        group.clear()

    for record in records:
        if record.kind == BAD_AGGREGATE:
            flush()
            entries.append(_entry(record.data, record.partition_key, (record,), False))
            continue
        group.append(record)
        if len(group) == aggregate_size:
            flush()
    flush()
    return entries


def put_all(
    client: Any,
    stream: str,
    records: Sequence[SampleRecord],
    *,
    rate: float = 0.0,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    on_progress: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    aggregate_size: int = 0,
    aggregate_share: float = 1.0,
) -> ProduceReport:
    """Send every record; ``rate`` > 0 caps Kinesis records (PutRecords
    entries) per second over the run; ``aggregate_size``/``aggregate_share``:
    :func:`plan_entries`."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts={max_attempts}: must be >= 1")
    entries = plan_entries(records, aggregate_size, aggregate_share)
    report = ProduceReport(stream)
    started = time.monotonic()
    sent = 0
    # A rate caps each request too, so that the pace is smooth within a second.
    per_call = MAX_RECORDS_PER_CALL if rate <= 0 else max(1, min(MAX_RECORDS_PER_CALL, int(rate)))
    for batch in chunks(entries, max_records=per_call):
        if rate > 0:
            ahead = sent / rate - (time.monotonic() - started)
            if ahead > 0:
                sleep(ahead)
        outcome = put_entries(client, stream, batch, max_attempts=max_attempts, sleep=sleep)
        report.calls += outcome.calls
        report.retried_entries += outcome.retried_entries
        for stored in outcome.stored:
            report.add(stored)
        if outcome.failed:
            raise ProduceError(
                f"{len(outcome.failed)} records still rejected by {stream} after {max_attempts} "
                f"attempts; first error: {outcome.last_error}"
            )
        sent += len(batch)
        if on_progress is not None:
            on_progress(sent)
    report.seconds = time.monotonic() - started
    return report


def kinesis_client(
    region: str, endpoint_url: str | None = None, credentials: Mapping[str, str] | None = None
) -> Any:
    """A client with bounded timeouts and retries (no call may hang a run).

    ``credentials`` (``AWS_ACCESS_KEY_ID``-style keys) pins them, e.g. the
    emulators' fake ones; without, boto3's default chain applies (real AWS).
    """
    return aws_clients.client(
        "kinesis",
        PRODUCER_LIMITS,
        region=region,
        endpoint_url=endpoint_url,
        credentials=client_credentials(credentials),
    )


def client_credentials(credentials: Mapping[str, str] | None) -> dict[str, str]:
    """boto3.client keyword arguments from environment-style credential names."""
    if not credentials:
        return {}
    names = {
        "AWS_ACCESS_KEY_ID": "aws_access_key_id",
        "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
        "AWS_SESSION_TOKEN": "aws_session_token",
    }
    return {names[k]: v for k, v in credentials.items() if k in names}


def ensure_stream(client: Any, stream: str, shard_count: int | None, timeout: float = 60) -> None:
    """Create the stream if absent (``shard_count`` None: on-demand) and wait for ACTIVE."""
    try:
        client.describe_stream_summary(StreamName=stream)
    except client.exceptions.ResourceNotFoundException:
        if shard_count is None:
            client.create_stream(StreamName=stream, StreamModeDetails={"StreamMode": "ON_DEMAND"})
        else:
            client.create_stream(StreamName=stream, ShardCount=shard_count)
    attempts = max(1, math.ceil(timeout / _STREAM_POLL_SEC))
    try:
        client.get_waiter("stream_exists").wait(
            StreamName=stream, WaiterConfig={"Delay": _STREAM_POLL_SEC, "MaxAttempts": attempts}
        )
    except WaiterError as exc:
        raise TimeoutError(f"stream {stream} not ACTIVE within {timeout:.0f}s: {exc}") from exc
