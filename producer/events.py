"""Sample events for the local run and the end-to-end suite: pure, seeded, exact.

A run must be able to say exactly what it expects in the table and on the
failure topic, so the mix is computed, not sampled: ``count`` records of which
``round(count * malformed_share)`` are malformed (cycling through every failure
kind) and ``round(count * duplicate_share)`` re-send an earlier valid event
byte for byte (an at-least-once producer retrying). Positions are shuffled with
a seeded RNG so a failing run can be replayed.

Events follow an instance's own schema (:class:`EventSchema`, from its
``job.event_fields``, ``id_field`` and ``event_time_field``): a valid event
has every field with a value of its type, and each malformed kind breaks the
schema's own fields (the id goes missing, the event time is not a timestamp,
...), so the same mix exercises every instance's checks. Without a schema the
default fields are used.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from model.config import DEFAULT_EVENT_FIELDS, EventField, JobSettings
from model.record import (
    BAD_AGGREGATE,
    BAD_TIMESTAMP,
    MALFORMED_JSON,
    MISSING_FIELD,
    NOT_UTF8,
    TOO_LARGE,
    TRAILING_DATA,
    WRONG_TYPE,
)
from producer.aggregation import aggregate, corrupt

# The failure reasons the job assigns (job.transform); the producer can make
# one record of each on purpose (every one of model.record.REASONS; a test
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


# What ``too_large`` pads with: a key no event field can have (a field's column
# starts with a letter, model.config), so the padding is never mistaken for one.
PAD_KEY: Final = "_pad"
# The value ``wrong_type`` gives a field: a number, or a string where the
# schema wants a number.
_WRONG_VALUE: Final = 42


@dataclass(frozen=True)
class EventSchema:
    """The fields one instance's events carry (``JobSettings.event_fields``,
    ``id_field``, ``event_time_field``); the defaults are the job's."""

    fields: tuple[EventField, ...] = DEFAULT_EVENT_FIELDS
    id_field: str = "id"
    event_time_field: str = "occurredAt"

    @classmethod
    def of(cls, settings: JobSettings) -> EventSchema:
        """The schema of an instance's job settings (or of a ``JobConfig``)."""
        return cls(settings.event_fields, settings.id_field, settings.event_time_field)

    @property
    def wrong_type_field(self) -> EventField:
        """The field ``wrong_type`` breaks: the last one that is neither the id
        nor the event time (the id when there is none), so the record keeps
        the id and a valid event time and fails on the type alone."""
        others = [f for f in self.fields if f.name not in (self.id_field, self.event_time_field)]
        if others:
            return others[-1]
        return next(f for f in self.fields if f.name == self.id_field)


DEFAULT_SCHEMA: Final = EventSchema()
# An event's ``object`` fields (the payload of the default schema).
Payload = dict[str, object]


def field_value(
    spec: EventField, index: int, event_type: str, stamp: str, payload: Payload
) -> object:
    """A valid value of ``spec``'s type for the event numbered ``index``:
    strings take the event type, timestamps the event's stamp, objects the
    payload; the rest derive from ``index`` (no draw from the mix's RNG, so a
    schema's extra fields never change the rest of a seeded mix)."""
    if spec.type == "timestamp":
        return stamp
    if spec.type == "object":
        return payload
    if spec.type in ("int", "long"):
        return index
    if spec.type in ("float", "double"):
        return index + 0.25
    if spec.type == "boolean":
        return index % 2 == 0
    if spec.type == "array":
        return [event_type, index]
    return event_type


@dataclass(frozen=True)
class SampleRecord:
    """One Kinesis record to put, and what the job must make of it.

    ``event_id`` is set for valid records and duplicates (the id the table must
    hold once); ``kind`` is the failure reason for malformed ones.
    """

    kind: str  # VALID, DUPLICATE or a failure reason (model.record.REASONS)
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
    schema: EventSchema = DEFAULT_SCHEMA
    # A key the schema does not declare, carried by this share of the valid
    # events (a producer ahead of its instance's job.event_fields).
    undeclared_key: str = ""
    undeclared_share: float = 0.0

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"count={self.count}: must be >= 0")
        for name in ("malformed_share", "duplicate_share"):
            share = getattr(self, name)
            if not 0.0 <= share <= 1.0:
                raise ValueError(f"{name}={share}: must be between 0 and 1")
        if not 0.0 <= self.undeclared_share <= 1.0:
            raise ValueError(f"undeclared_share={self.undeclared_share}: must be between 0 and 1")
        if self.undeclared_share > 0 and not self.undeclared_key:
            raise ValueError("undeclared_key: empty while undeclared_share > 0")
        if any(f.name == self.undeclared_key for f in self.schema.fields):
            raise ValueError(
                f"undeclared_key={self.undeclared_key!r}: the schema declares it already"
            )
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


def event_body(
    event_id: str,
    event_type: str,
    occurred_at: str,
    payload: Payload,
    *,
    schema: EventSchema = DEFAULT_SCHEMA,
    index: int = 0,
) -> dict[str, object]:
    """A valid event of ``schema`` as a dict, its fields in schema order."""
    return {
        spec.name: event_id
        if spec.name == schema.id_field
        else field_value(spec, index, event_type, occurred_at, payload)
        for spec in schema.fields
    }


def encode(body: dict[str, object]) -> bytes:
    return json.dumps(body, separators=(",", ":")).encode()


def event_json(event_id: str, event_type: str, occurred_at: str, payload: Payload) -> bytes:
    """A valid event of the default fields, for tests that write one by hand."""
    return encode(event_body(event_id, event_type, occurred_at, payload))


def valid_event(
    event_id: str,
    instant: datetime,
    *,
    nanos: int | None = None,
    offset: str = "Z",
    event_type: str = "created",
    payload: Payload | None = None,
    schema: EventSchema = DEFAULT_SCHEMA,
    index: int = 0,
) -> SampleRecord:
    """A valid record. ``nanos=None`` writes microseconds (6 digits) instead of 9."""
    if nanos is None:
        stamp = instant.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    else:
        stamp = format_timestamp(instant, nanos, offset)
    body = event_body(event_id, event_type, stamp, payload or {"n": 0}, schema=schema, index=index)
    data = encode(body)
    return SampleRecord(VALID, data, event_id, event_id)


def malformed_record(
    kind: str, key: str, *, too_large_bytes: int = 0, schema: EventSchema = DEFAULT_SCHEMA
) -> SampleRecord:
    """One record the job must reject with reason ``kind`` (and not put in the
    table), made from ``schema``'s own fields."""
    now = "2026-01-02T03:04:05.123456789Z"

    def body(**changes: object) -> dict[str, object]:
        return {**event_body(key, "created", now, {}, schema=schema), **changes}

    id_key = json.dumps(schema.id_field).encode()
    time_key = json.dumps(schema.event_time_field).encode()
    data: bytes
    if kind == MALFORMED_JSON:
        data = b"{" + id_key + b':"' + key.encode() + b'",' + time_key + b":"
    elif kind == NOT_UTF8:
        data = b"{" + id_key + b':"' + key.encode() + b'",' + time_key + b':"\xff\xfe\xfd"}'
    elif kind == MISSING_FIELD:
        data = encode({n: v for n, v in body().items() if n != schema.id_field})
    elif kind == WRONG_TYPE:
        target = schema.wrong_type_field
        numbers = ("int", "long", "float", "double")
        wrong = str(_WRONG_VALUE) if target.type in numbers else _WRONG_VALUE
        data = encode(body(**{target.name: wrong}))
    elif kind == BAD_TIMESTAMP:
        data = encode(body(**{schema.event_time_field: "yesterday at noon"}))
    elif kind == TRAILING_DATA:
        # Two events in one record, newline-separated: the second would be lost
        # if the job read only the first.
        second = event_body(key + "-b", "created", now, {}, schema=schema)
        data = encode(body()) + b"\n" + encode(second)
    elif kind == BAD_AGGREGATE:
        # A KPL aggregate of two events whose MD5 is broken: one failure record.
        second = event_body(key + "-b", "created", now, {}, schema=schema)
        pair = [encode(body()), encode(second)]
        data = corrupt(aggregate(key, pair))
    elif kind == TOO_LARGE:
        if too_large_bytes <= 0:
            raise ValueError(f"too_large_bytes={too_large_bytes}: must be > 0 for {TOO_LARGE}")
        head = encode(body(**{PAD_KEY: ""}))
        pad = max(0, too_large_bytes - len(head))
        data = encode(body(**{PAD_KEY: "x" * pad}))
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

    # Which valid events carry the undeclared key: its own RNG, so the rest of
    # a seeded mix is the same with or without it.
    valid_ordinals = range(kinds.count(VALID))
    carriers = set(
        random.Random(spec.seed + 1).sample(
            valid_ordinals, round(len(valid_ordinals) * spec.undeclared_share)
        )
    )
    ordinal = 0
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
                schema=spec.schema,
                index=index,
            )
            if ordinal in carriers:
                record = with_key(record, spec.undeclared_key, UNDECLARED_VALUES[index % 3])
            ordinal += 1
            sent.append(record)
        elif kind == DUPLICATE:
            original = rng.choice(sent)
            record = SampleRecord(
                DUPLICATE, original.data, original.partition_key, original.event_id
            )
        else:
            record = malformed_record(
                kind, key, too_large_bytes=spec.too_large_bytes, schema=spec.schema
            )
        records.append(record)
    return records


UNDECLARED_VALUES: Final = ("web", "app", "store")


def with_key(record: SampleRecord, key: str, value: object) -> SampleRecord:
    """``record`` with one more top-level key (appended after the others)."""
    body = json.loads(record.data)
    body[key] = value
    return SampleRecord(record.kind, encode(body), record.partition_key, record.event_id)


def carrying(records: Sequence[SampleRecord], key: str) -> set[str]:
    """The ids of the valid events that carry ``key`` at the top level."""
    return {
        r.event_id
        for r in records
        if r.kind == VALID and r.event_id is not None and key in json.loads(r.data)
    }


def expected_ids(records: Sequence[SampleRecord]) -> set[str]:
    """The ids the table must hold, each exactly once."""
    return {r.event_id for r in records if r.event_id is not None and not r.is_failure}


def now_utc() -> datetime:
    return datetime.now(UTC)
