"""The failure record's Kafka key and headers: what the job writes to the
failure topic and what its readers (the reprocess command, the local run's
summary, the producer's expectations) key and decode by. Pure functions of the
record vocabulary (:mod:`model.record`), so a reader needs no Spark."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from model.claim_check import bounded
from model.record import (
    ARRIVAL,
    ARRIVAL_HEADER,
    COORDINATES,
    ERROR_CLASS,
    EXCEPTION_HEADER,
    INSTANCE_HEADER,
    MESSAGE,
    MESSAGE_HEADER,
    REASON,
    REASON_HEADER,
)

# The coordinates sent as they are (the arrival time is formatted).
_PLAIN_COORDINATES: Final = tuple(c for c in COORDINATES if c is not ARRIVAL)


def record_key(
    stream: str | None, shard: str | None, sequence: str | None, sub: int | None = None
) -> str:
    """Stable across replays: where the record sits in the stream, and for a
    user record of a KPL aggregate its place in the aggregate (``/<sub>``), so
    two failing user records of one Kinesis record keep two keys."""
    base = f"{stream or '-'}/{shard or '-'}/{sequence or '-'}"
    return base if sub is None else f"{base}/{sub}"


def record_headers(row: dict[str, Any], instance_id: str) -> list[tuple[str, bytes]]:
    """Every header of a failure record, each value bounded
    (:data:`model.failure_limits.HEADER_VALUE_MAX_BYTES`: the message is free text).
    ``row`` is keyed by the coordinates' table columns, as the batch's one pass
    hands failure rows over (:func:`job.sinks.batch_task.split`)."""
    headers: list[tuple[str, bytes]] = [
        (REASON_HEADER, str(row[REASON]).encode()),
        (EXCEPTION_HEADER, str(row[ERROR_CLASS]).encode()),
        (MESSAGE_HEADER, str(row[MESSAGE]).encode()),
        (INSTANCE_HEADER, instance_id.encode()),
    ]
    for coordinate in _PLAIN_COORDINATES:
        if row.get(coordinate.column) is not None:
            headers.append((coordinate.header, str(row[coordinate.column]).encode()))
    arrival = row.get(ARRIVAL.column)
    if isinstance(arrival, datetime):
        stamp = arrival if arrival.tzinfo else arrival.replace(tzinfo=UTC)
        headers.append((ARRIVAL_HEADER, stamp.astimezone(UTC).isoformat().encode()))
    return [(name, bounded(value)) for name, value in headers]
