"""The pure logic of ``python -m scripts.reprocess``: no client, no clock, no I/O.

* which records a run selects (``--reason``, ``--from-time``/``--to-time``);
* where each topic partition starts (committed position, ``--from-offset``,
  ``--from-time``) and what a start below the retained log means;
* the PutRecords entry of a record (the requests, their limits and the
  re-sends are :mod:`producer.kinesis_put`'s, shared with the sample producer), and
  which one is too large for any request;
* the consumer position the run may commit: per partition, just past the
  longest run of records Kinesis accepted, never past a record that was not
  re-sent (rejected, filtered out, refused by Kinesis or not yet sent), so a
  crash or a refusal can cause a re-send but never a skip.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Final

from producer import kinesis_put
from producer.kinesis_put import MAX_RECORD_BYTES
from scripts.reprocess.hook import FailedRecord


class PlanError(ValueError):
    """Bad input to the plan (flags, offsets, a response we cannot read)."""


# ------------------------------------------------------------------ selection


@dataclass(frozen=True)
class Selection:
    """What a run re-sends: ``reasons`` (empty: every reason) in the time window
    ``[from_ms, to_ms)`` of Kafka record timestamps (None: unbounded)."""

    reasons: frozenset[str] = frozenset()
    from_ms: int | None = None
    to_ms: int | None = None

    def skip_reason(self, record: FailedRecord) -> str | None:
        """Why ``record`` is not selected, or None if it is."""
        if self.reasons and record.reason not in self.reasons:
            return f"reason {record.reason or '<none>'} not selected"
        if self.from_ms is not None and (
            record.timestamp_ms is None or record.timestamp_ms < self.from_ms
        ):
            return "before --from-time"
        return None

    def past_end(self, record: FailedRecord) -> bool:
        """At or after ``--to-time``: the partition's read ends here (the record
        is not read, so the position stays in front of it)."""
        return (
            self.to_ms is not None
            and record.timestamp_ms is not None
            and record.timestamp_ms >= self.to_ms
        )


def parse_time(flag: str, text: str) -> int:
    """ISO-8601 with an offset -> epoch milliseconds (Kafka timestamps)."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise PlanError(
            f"{flag} {text!r}: expected ISO-8601 with an offset, e.g. 2026-11-21T12:00:00Z"
        ) from exc
    if parsed.tzinfo is None:
        raise PlanError(f"{flag} {text!r}: no UTC offset; add one, e.g. {text}Z or {text}+09:00")
    return int(parsed.timestamp() * 1000)


def parse_reasons(values: Sequence[str], allowed: Sequence[str]) -> frozenset[str]:
    """``--reason`` values (repeatable, comma-separated) checked against the job's reasons."""
    reasons = {r.strip() for value in values for r in value.split(",") if r.strip()}
    unknown = sorted(reasons - set(allowed))
    if unknown:
        raise PlanError(
            f"--reason {unknown[0]!r}: not a failure reason; allowed: {', '.join(allowed)}"
        )
    return frozenset(reasons)


_OFFSET_TOKEN: Final = re.compile(r"^(?:(?P<partition>\d+):)?(?P<offset>\d+)$")


def parse_from_offsets(values: Sequence[str]) -> dict[int | None, int]:
    """``--from-offset`` values: ``N`` (every partition) or ``P:N`` (partition P),
    repeatable and comma-separated. Key None is "every other partition"."""
    found: dict[int | None, int] = {}
    for value in values:
        for token in (t.strip() for t in value.split(",")):
            match = _OFFSET_TOKEN.fullmatch(token)
            if match is None:
                raise PlanError(
                    f"--from-offset {token!r}: expected N (every partition) or P:N "
                    "(partition P), offsets >= 0"
                )
            partition = int(match["partition"]) if match["partition"] is not None else None
            if partition in found:
                which = "every partition" if partition is None else f"partition {partition}"
                raise PlanError(f"--from-offset: {which} given twice")
            found[partition] = int(match["offset"])
    return found


# ------------------------------------------------------------------ where to start


@dataclass(frozen=True)
class Start:
    """Where one partition's read starts and why; ``warning`` is for the operator."""

    partition: int
    offset: int
    source: str
    warning: str | None = None


def start_offsets(
    partitions: Sequence[int],
    watermarks: Mapping[int, tuple[int, int]],
    committed: Mapping[int, int | None],
    *,
    from_offsets: Mapping[int | None, int] | None = None,
    time_offsets: Mapping[int, int] | None = None,
) -> list[Start]:
    """The first offset to read per partition.

    ``--from-offset`` wins, then ``--from-time`` (``time_offsets``: the
    broker's answer, negative when no record is that recent), then the group's
    committed position, then the earliest retained offset. A start below the
    earliest retained offset starts there, with a warning: retention deleted
    those records, and if they came from a committed position they were
    never re-sent.
    """
    if from_offsets:
        unknown = sorted(p for p in from_offsets if p is not None and p not in partitions)
        if unknown:
            raise PlanError(
                f"--from-offset: partition {unknown[0]} does not exist; the topic has "
                f"partitions {', '.join(str(p) for p in partitions)}"
            )
    starts: list[Start] = []
    for partition in partitions:
        low, high = watermarks[partition]
        if from_offsets and (partition in from_offsets or None in from_offsets):
            wanted = from_offsets[partition] if partition in from_offsets else from_offsets[None]
            starts.append(_clamped(partition, wanted, low, "--from-offset", expired=False))
        elif time_offsets is not None:
            found = time_offsets.get(partition, -1)
            if found < 0:
                starts.append(Start(partition, high, "--from-time (no record that recent)"))
            else:
                starts.append(_clamped(partition, found, low, "--from-time", expired=False))
        else:
            position = committed.get(partition)
            if position is None or position < 0:
                starts.append(Start(partition, low, "earliest (no committed position)"))
            else:
                starts.append(_clamped(partition, position, low, "committed", expired=True))
    return starts


def _clamped(partition: int, wanted: int, low: int, source: str, *, expired: bool) -> Start:
    if wanted >= low:
        return Start(partition, wanted, source)
    if expired:
        warning = (
            f"partition {partition}: committed position {wanted} is below the earliest "
            f"retained offset {low}: {low - wanted} records expired (topic retention) "
            "before they were re-sent"
        )
    else:
        warning = f"partition {partition}: offset {wanted} is no longer retained; from {low}"
    return Start(partition, low, source, warning)


# ------------------------------------------------------------------ PutRecords requests


# One entry of a PutRecords request: the (fixed) bytes, keyed as the original
# was, and the failure record they came from (``source``).
Entry = kinesis_put.Entry[FailedRecord]


def entry_for(record: FailedRecord, data: bytes) -> Entry:
    """The entry that re-sends ``record`` as ``data`` (its fixed bytes)."""
    return Entry(data, record.partition_key, record)


def too_large(entry: Entry, max_record_bytes: int = MAX_RECORD_BYTES) -> str | None:
    """Why Kinesis would refuse the whole request for this one entry, or None."""
    if entry.size > max_record_bytes:
        return (
            f"{entry.size:,} bytes with its partition key; a Kinesis record may have "
            f"{max_record_bytes:,} (shrink it in the fix hook)"
        )
    return None


def rate_delay(sent: int, rate: float, elapsed: float) -> float:
    """Seconds to wait before sending more so that ``sent`` records took at
    least ``sent / rate`` seconds (``rate`` <= 0: no limit)."""
    if rate <= 0:
        return 0.0
    return max(0.0, sent / rate - elapsed)


# ------------------------------------------------------------------ consumer position


class State(Enum):
    """What became of a record read from the topic."""

    PENDING = "pending"  # in a request not yet accepted
    SENT = "re-sent"  # Kinesis accepted it
    SKIPPED = "skipped"  # not selected (--reason, --from-time)
    REJECTED = "rejected"  # the fix hook refused it
    FAILED = "failed"  # Kinesis refused it after every attempt, or too large


def advance(position: int, states: Iterable[tuple[int, State]]) -> int:
    """The position after reading ``states`` (offset order) from ``position``:
    just past the last record of the leading run of SENT ones."""
    for offset, state in states:
        if state is not State.SENT:
            break
        position = offset + 1
    return position


class Positions:
    """Per partition, the offset the consumer group may commit (the next one a
    later run reads). Records are reported in read (offset) order with
    :meth:`read`, and :meth:`settle` records what Kinesis did with sent ones.
    The first record that is not re-sent holds its partition for the rest of
    the run: the position never moves past it, however many records after it
    are re-sent (the next run re-sends those again, and the table's
    de-duplication by event id absorbs them)."""

    def __init__(self, starts: Mapping[int, int]) -> None:
        self._position = dict(starts)
        self._open: dict[int, dict[int, State]] = {p: {} for p in starts}
        self._held: dict[int, tuple[int, State]] = {}
        self._committed: dict[int, int] = dict(starts)

    def read(self, partition: int, offset: int, state: State) -> None:
        if partition in self._held:
            return
        self._open[partition][offset] = state
        self._advance(partition)

    def settle(self, records: Iterable[tuple[int, int]], state: State) -> None:
        """``state`` (SENT or FAILED) for records earlier read as PENDING."""
        touched: set[int] = set()
        for partition, offset in records:
            opened = self._open[partition]
            if offset in opened:
                opened[offset] = state
                touched.add(partition)
        for partition in touched:
            self._advance(partition)

    def _advance(self, partition: int) -> None:
        opened = self._open[partition]
        position = advance(self._position[partition], opened.items())
        for offset in [o for o in opened if o < position]:
            del opened[offset]
        self._position[partition] = position
        if opened:
            offset, state = next(iter(opened.items()))
            if state not in (State.PENDING, State.SENT):
                self._held[partition] = (offset, state)
                opened.clear()

    def positions(self) -> dict[int, int]:
        return dict(self._position)

    def held(self) -> dict[int, tuple[int, State]]:
        """Partition -> (offset, state) of the record its position stays in front of."""
        return dict(sorted(self._held.items()))

    def to_commit(self) -> dict[int, int]:
        """Positions that moved since the last :meth:`mark_committed`."""
        return {p: o for p, o in self._position.items() if o != self._committed.get(p)}

    def mark_committed(self, offsets: Mapping[int, int]) -> None:
        self._committed.update(offsets)


def format_offsets(offsets: Mapping[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(offsets.items())) or "-"
