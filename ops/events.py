"""Sample events for the local run and the end-to-end suite: pure, seeded, exact.

A run must be able to say exactly what it expects in the table and on the
failure topic, so the mix is computed, not sampled: ``count`` records of which
``round(count * malformed_share)`` are malformed (cycling through every failure
kind) and ``round(count * duplicate_share)`` re-send an earlier valid event
byte for byte (an at-least-once producer retrying). Positions are shuffled with
a seeded RNG so a failing run can be replayed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from app.transform import (
    BAD_AGGREGATE,
    BAD_TIMESTAMP,
    MALFORMED_JSON,
    MISSING_FIELD,
    NOT_UTF8,
    TOO_LARGE,
    TRAILING_DATA,
    WRONG_TYPE,
)
from ops.aggregation import aggregate, corrupt

# The failure reasons the job assigns (app.transform); the producer can make
# one record of each on purpose (every one of app.transform.REASONS; a test
# checks). This order is the cycle a mix goes through.
FAILURE_KINDS: Final = (
    MALFORMED_JSON,
    NOT_UTF8,
    MISSING_FIELD,
    WRONG_TYPE,
    BAD_TIMESTAMP,
    TRAILING_DATA,
    BAD_AGGREGATE,
    TOO_LARGE,
)
# ``too_large`` needs a size above the job's ``max_record_bytes``, which only
# the caller knows; it is opt-in.
DEFAULT_FAILURE_KINDS: Final = tuple(k for k in FAILURE_KINDS if k != TOO_LARGE)

VALID: Final = "valid"
DUPLICATE: Final = "duplicate"

EVENT_TYPES: Final = ("created", "updated", "shipped", "cancelled")
# Offsets a producer in another timezone would send; the job must turn each
# into the same UTC instant.
OFFSETS: Final = ("Z", "+00:00", "+09:00", "-05:30")


@dataclass(frozen=True)
class SampleRecord:
    """One Kinesis record to put, and what the job must make of it.

    ``event_id`` is set for valid records and duplicates (the id the table must
    hold once); ``kind`` is the failure reason for malformed ones.
    """

    kind: str  # VALID, DUPLICATE or a failure reason (app.transform.REASONS)
    data: bytes
    partition_key: str
    event_id: str | None = None

    @property
    def is_failure(self) -> bool:
        return self.kind not in (VALID, DUPLICATE)


@dataclass(frozen=True)
class MixSpec:
    """What to produce. Shares are of ``count``; rounding is to the nearest record."""

    count: int
    malformed_share: float = 0.02
    duplicate_share: float = 0.05
    nanos: bool = True
    seed: int = 7
    id_prefix: str = "evt"
    failure_kinds: tuple[str, ...] = DEFAULT_FAILURE_KINDS
    too_large_bytes: int = 0

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"count={self.count}: must be >= 0")
        for name in ("malformed_share", "duplicate_share"):
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name}={share}: must be between 0 and 1")
        if self.malformed_share + self.duplicate_share > 1.0:
            raise ValueError(
                f"malformed_share + duplicate_share = "
                f"{self.malformed_share + self.duplicate_share}: must be <= 1"
            )
        unknown = sorted(set(self.failure_kinds) - set(FAILURE_KINDS))
        if unknown:
            raise ValueError(
                f"failure_kinds: {unknown[0]!r} is not one of {', '.join(FAILURE_KINDS)}"
            )
        if self.malformed_share > 0 and not self.failure_kinds:
            raise ValueError("failure_kinds: empty while malformed_share > 0")
        if TOO_LARGE in self.failure_kinds and self.too_large_bytes <= 0:
            raise ValueError(
                "too_large_bytes: must be > 0 (the job's max_record_bytes + 1 or more) "
                f"when failure_kinds includes {TOO_LARGE!r}"
            )

    @property
    def malformed_count(self) -> int:
        return round(self.count * self.malformed_share)

    @property
    def duplicate_count(self) -> int:
        return round(self.count * self.duplicate_share)


def format_timestamp(instant: datetime, nanos: int, offset: str) -> str:
    """ISO-8601 with 9 fractional digits (``nanos`` < 1e9) in the given offset."""
    if not 0 <= nanos < 1_000_000_000:
        raise ValueError(f"nanos={nanos}: must be in [0, 1e9)")
    if offset == "Z":
        delta = timedelta(0)
    else:
        sign = -1 if offset[0] == "-" else 1
        hours, minutes = offset[1:].split(":")
        delta = sign * timedelta(hours=int(hours), minutes=int(minutes))
    local = instant.astimezone(UTC).replace(microsecond=0, tzinfo=None) + delta
    return f"{local:%Y-%m-%dT%H:%M:%S}.{nanos:09d}{offset}"


def event_json(
    event_id: str,
    event_type: str,
    occurred_at: str,
    payload: dict[str, object],
) -> bytes:
    return json.dumps(
        {"id": event_id, "type": event_type, "occurredAt": occurred_at, "payload": payload},
        separators=(",", ":"),
    ).encode()


def valid_event(
    event_id: str,
    instant: datetime,
    *,
    nanos: int | None = None,
    offset: str = "Z",
    event_type: str = "created",
    payload: dict[str, object] | None = None,
) -> SampleRecord:
    """A valid record. ``nanos=None`` writes microseconds (6 digits) instead of 9."""
    if nanos is None:
        stamp = instant.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    else:
        stamp = format_timestamp(instant, nanos, offset)
    data = event_json(event_id, event_type, stamp, payload or {"n": 0})
    return SampleRecord(VALID, data, event_id, event_id)


def malformed_record(kind: str, key: str, *, too_large_bytes: int = 0) -> SampleRecord:
    """One record the job must reject with reason ``kind`` (and not put in the table)."""
    now = "2026-01-02T03:04:05.123456789Z"
    data: bytes
    if kind == MALFORMED_JSON:
        data = b'{"id":"' + key.encode() + b'","type":"created","occurredAt":'
    elif kind == NOT_UTF8:
        data = b'{"id":"' + key.encode() + b'","type":"\xff\xfe\xfd"}'
    elif kind == MISSING_FIELD:
        data = json.dumps({"type": "created", "occurredAt": now, "payload": {}}).encode()
    elif kind == WRONG_TYPE:
        data = json.dumps({"id": key, "type": "created", "occurredAt": now, "payload": 42}).encode()
    elif kind == BAD_TIMESTAMP:
        data = event_json(key, "created", "yesterday at noon", {})
    elif kind == TRAILING_DATA:
        # Two events in one record, newline-separated: the second would be lost
        # if the job read only the first.
        data = (
            event_json(key, "created", now, {}) + b"\n" + event_json(key + "-b", "created", now, {})
        )
    elif kind == BAD_AGGREGATE:
        # A KPL aggregate of two events whose MD5 is broken: one failure record.
        pair = [event_json(key, "created", now, {}), event_json(key + "-b", "created", now, {})]
        data = corrupt(aggregate(key, pair))
    elif kind == TOO_LARGE:
        if too_large_bytes <= 0:
            raise ValueError(f"too_large_bytes={too_large_bytes}: must be > 0 for {TOO_LARGE}")
        head = event_json(key, "created", now, {"pad": ""})
        pad = max(0, too_large_bytes - len(head))
        data = event_json(key, "created", now, {"pad": "x" * pad})
    else:
        raise ValueError(f"kind={kind!r}: not one of {', '.join(FAILURE_KINDS)}")
    return SampleRecord(kind, data, key)


def generate(spec: MixSpec, start: datetime) -> list[SampleRecord]:
    """The exact record mix of ``spec``; valid events are spread over the minute
    before ``start`` so they share one date partition unless ``start`` is near
    midnight."""
    rng = random.Random(spec.seed)
    malformed = spec.malformed_count
    duplicates = spec.duplicate_count
    valid = spec.count - malformed - duplicates
    if duplicates and valid == 0:
        raise ValueError("duplicate_share: needs at least one valid record to duplicate")
    kinds: list[str] = [VALID] * valid + [DUPLICATE] * duplicates
    kinds += [spec.failure_kinds[i % len(spec.failure_kinds)] for i in range(malformed)]
    rng.shuffle(kinds)
    if duplicates:
        # A duplicate re-sends an earlier event: the first record must be valid.
        first_valid = kinds.index(VALID)
        kinds[0], kinds[first_valid] = kinds[first_valid], kinds[0]

    records: list[SampleRecord] = []
    sent: list[SampleRecord] = []
    for index, kind in enumerate(kinds):
        key = f"{spec.id_prefix}-{index:07d}"
        if kind == VALID:
            instant = start - timedelta(milliseconds=rng.randrange(60_000))
            record = valid_event(
                key,
                instant,
                nanos=rng.randrange(1_000_000_000) if spec.nanos else None,
                offset=rng.choice(OFFSETS),
                event_type=rng.choice(EVENT_TYPES),
                payload={"n": index, "amount": rng.randrange(1, 100_000)},
            )
            sent.append(record)
        elif kind == DUPLICATE:
            original = rng.choice(sent)
            record = SampleRecord(
                DUPLICATE, original.data, original.partition_key, original.event_id
            )
        else:
            record = malformed_record(kind, key, too_large_bytes=spec.too_large_bytes)
        records.append(record)
    return records


def expected_ids(records: Sequence[SampleRecord]) -> set[str]:
    """The ids the table must hold, each exactly once."""
    return {r.event_id for r in records if r.event_id is not None and not r.is_failure}


def now_utc() -> datetime:
    return datetime.now(UTC)
