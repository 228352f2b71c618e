"""Each shard's tip and the job's lag behind it, in records and in age.

No Kinesis API returns an open shard's latest sequence number: ListShards
gives only a closed shard's ``EndingSequenceNumber``, and a ``LATEST``
iterator points *after* the tip. Sequence numbers grow over time but are not
consecutive, so "tip minus committed" is not a record count either
(https://docs.aws.amazon.com/kinesis/latest/APIReference/API_PutRecord.html:
"Sequence numbers generally increase over time"; moto numbers them 1, 2, 3,
which would hide the mistake). The records behind the job must be read.

The cheapest read that answers both: from the job's committed position
forward, with GetRecords, until a response says ``MillisBehindLatest`` 0
("record processing is caught up, and there are no new records to process at
this moment", https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetRecords.html).
The last record read is the tip and the count is the exact lag. A job that
keeps up costs one GetShardIterator and one GetRecords per shard.

A large backlog is not read to the end: the scan stops after ``max_calls``
calls (GetRecords returns at most 10,000 records per call, and a shard serves
5 read transactions per second *shared with the job's own reads*,
https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html).
The lag is then an estimate, the records counted plus the arrival rate seen
over them times the ``MillisBehindLatest`` still left, and the tip of an open
shard comes from a short read at ``AT_TIMESTAMP`` now minus ``tip_window_sec``.

Age lag, two figures: how far behind the tip the committed position is in
arrival time (the unread records' arrival span, plus the
``MillisBehindLatest`` still left when a scan stops short), and the age of the
oldest unread record (now minus its ``ApproximateArrivalTimestamp``), which
keeps growing while the job is down even when nothing new arrives. A response
that reaches the tip reports ``MillisBehindLatest`` 0 whatever it skipped, so
that field alone is no age.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Final

from scripts.status.checkpoint import AFTER, AT_TIMESTAMP, SHARD_END, TRIM_HORIZON, Position

MAX_RECORDS_PER_CALL: Final = 10_000


@dataclass(frozen=True)
class Shard:
    """What ListShards says about a shard
    (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_ListShards.html)."""

    shard_id: str
    parents: tuple[str, ...] = ()
    ending_sequence: str | None = None  # set once the shard is closed

    @property
    def closed(self) -> bool:
        return self.ending_sequence is not None

    @staticmethod
    def from_api(raw: dict[str, Any]) -> Shard:
        parents = tuple(
            str(raw[k]) for k in ("ParentShardId", "AdjacentParentShardId") if raw.get(k)
        )
        ending = raw.get("SequenceNumberRange", {}).get("EndingSequenceNumber")
        return Shard(str(raw["ShardId"]), parents, None if ending is None else str(ending))


def list_shards(kinesis: Any, stream: str) -> list[Shard]:
    """Every shard Kinesis still lists (within retention), following NextToken
    (a call with NextToken must not name the stream)."""
    shards: list[Shard] = []
    response = kinesis.list_shards(StreamName=stream)
    while True:
        shards.extend(Shard.from_api(s) for s in response.get("Shards", []))
        token = response.get("NextToken")
        if not token:
            return sorted(shards, key=lambda s: s.shard_id)
        response = kinesis.list_shards(NextToken=token)


@dataclass(frozen=True)
class Budget:
    max_calls: int = 3
    max_records: int = MAX_RECORDS_PER_CALL

    def __post_init__(self) -> None:
        if self.max_calls < 1 or self.max_records < 1:
            raise ValueError(
                f"scan budget: max_calls={self.max_calls}, max_records={self.max_records}; "
                "both must be >= 1"
            )


@dataclass(frozen=True)
class Scan:
    """What reading a shard from a position found."""

    records: int = 0
    reached_tip: bool = False
    last_sequence: str | None = None
    first_arrival: datetime | None = None
    last_arrival: datetime | None = None
    last_behind_ms: int | None = None  # MillisBehindLatest of the last response
    calls: int = 0


def scan(kinesis: Any, stream: str, shard_id: str, position: Position, budget: Budget) -> Scan:
    """Read forward from ``position`` until caught up or the budget is spent."""
    iterator = kinesis.get_shard_iterator(
        StreamName=stream, ShardId=shard_id, **position.iterator_args()
    )["ShardIterator"]
    found = Scan()
    while iterator and found.calls < budget.max_calls and found.records < budget.max_records:
        limit = min(MAX_RECORDS_PER_CALL, budget.max_records - found.records)
        response = kinesis.get_records(ShardIterator=iterator, Limit=limit)
        found = add_response(found, response)
        if found.reached_tip:
            break
        iterator = response.get("NextShardIterator")
        if iterator is None:  # a closed shard read to its end
            return replace(found, reached_tip=True, last_behind_ms=0)
    return found


def add_response(found: Scan, response: dict[str, Any]) -> Scan:
    """Fold one GetRecords response into the scan so far. Pure."""
    records = response.get("Records", [])
    behind = response.get("MillisBehindLatest")
    behind_ms = None if behind is None else int(behind)
    first_arrival = found.first_arrival
    if first_arrival is None and records:
        first_arrival = records[0].get("ApproximateArrivalTimestamp")
    return Scan(
        records=found.records + len(records),
        reached_tip=behind_ms == 0,
        last_sequence=str(records[-1]["SequenceNumber"]) if records else found.last_sequence,
        first_arrival=first_arrival,
        last_arrival=records[-1].get("ApproximateArrivalTimestamp")
        if records
        else found.last_arrival,
        last_behind_ms=behind_ms,
        calls=found.calls + 1,
    )


@dataclass(frozen=True)
class Lag:
    """How far the job is behind one shard."""

    records: int  # exact when ``exact``, else counted so far (a lower bound)
    exact: bool
    estimate: int | None  # when not exact: counted + rate x time still behind
    behind_ms: int | None  # tip arrival - first unread arrival (None: unknown)
    oldest_unread_age_ms: int  # now - arrival of the first unread record; 0: none


def estimate_records(found: Scan) -> int | None:
    """Records behind, extrapolated from the arrival rate over the records read.
    None when the records read span no time (no rate to extrapolate)."""
    if found.first_arrival is None or found.last_arrival is None or found.last_behind_ms is None:
        return None
    span_ms = (found.last_arrival - found.first_arrival).total_seconds() * 1000.0
    if span_ms <= 0 or found.records < 2:
        return None
    rate_per_ms = (found.records - 1) / span_ms
    return found.records + round(rate_per_ms * found.last_behind_ms)


def lag_of(found: Scan, now: datetime) -> Lag:
    """The lag a scan from the committed position shows. Pure."""
    age = 0
    behind = found.last_behind_ms
    if found.first_arrival is not None and found.records:
        age = max(0, round((now - found.first_arrival).total_seconds() * 1000.0))
        if found.last_arrival is not None:
            span = (found.last_arrival - found.first_arrival).total_seconds() * 1000.0
            behind = round(span) + (found.last_behind_ms or 0)
    return Lag(
        records=found.records,
        exact=found.reached_tip,
        estimate=None if found.reached_tip else estimate_records(found),
        behind_ms=behind,
        oldest_unread_age_ms=age,
    )


@dataclass(frozen=True)
class ShardStatus:
    shard: Shard
    committed: Position
    tip: str | None  # the last sequence number in the shard; None: empty or unknown
    tip_note: str  # how the tip is known
    lag: Lag


DONE_LAG: Final = Lag(0, True, None, 0, 0)


def shard_status(
    kinesis: Any,
    stream: str,
    shard: Shard,
    committed: Position,
    budget: Budget,
    *,
    tip_window_sec: float,
    now: Callable[[], datetime],
) -> ShardStatus:
    """The tip of ``shard`` and the job's lag behind it, reading as little as possible."""
    if committed.kind == SHARD_END:
        return ShardStatus(shard, committed, shard.ending_sequence, "closed", DONE_LAG)
    found = scan(kinesis, stream, shard.shard_id, committed, budget)
    lag = lag_of(found, now())
    if found.reached_tip:
        tip = found.last_sequence or (committed.sequence if committed.kind == AFTER else None)
        note = "read to the tip" if tip is not None else "no record after the position"
        return ShardStatus(shard, committed, tip, note, lag)
    if shard.closed:
        return ShardStatus(shard, committed, shard.ending_sequence, "closed", lag)
    since = now() - timedelta(seconds=tip_window_sec)
    near_tip = scan(
        kinesis,
        stream,
        shard.shard_id,
        Position(AT_TIMESTAMP, timestamp=since.timestamp()),
        Budget(max_calls=budget.max_calls),
    )
    if near_tip.reached_tip and near_tip.last_sequence is not None:
        return ShardStatus(shard, committed, near_tip.last_sequence, "read near the tip", lag)
    return ShardStatus(
        shard,
        committed,
        None,
        f"unknown: backlog beyond the scan and no record in the last {tip_window_sec:.0f}s",
        lag,
    )


def position_for(
    shard: Shard, committed: dict[str, Position] | None, starting_position: str
) -> Position:
    """Where the job reads ``shard`` next: its committed position; a shard the
    offset does not list yet starts at TRIM_HORIZON (``python-kinesis``'s rule,
    and every record of a shard created after the start is new); before any
    commit, the configured starting position."""
    if committed is None:
        return Position(starting_position)
    return committed.get(shard.shard_id, Position(TRIM_HORIZON))
