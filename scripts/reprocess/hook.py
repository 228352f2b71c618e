"""The fix-up hook of ``python -m scripts.reprocess``: what it receives, how it refuses.

An operator names a callable on the command line (``--fix package.module:callable``).
It is called once per selected failure record with a :class:`FailedRecord` and
returns the bytes to put back on the stream. It refuses a record by raising
:class:`Reject` (or returning ``None``): the record is then not re-sent, stays
on the topic and is listed in the report, and the consumer position stops in
front of it (docs/operate.md, "Reprocess failures").

Any other exception is a bug in the hook, not a decision about the record, so
it stops the run (:class:`HookError`, naming the record) instead of silently
rejecting every record after it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from model.record import ARRIVAL_HEADER, REASON_HEADER


class Reject(Exception):  # noqa: N818 (a hook raises Reject("why"): the name is the API)
    """Raised by a fix-up hook to refuse a record; the message says why."""


class HookError(RuntimeError):
    """The hook could not be loaded, raised something other than Reject, or
    returned something other than bytes/None."""


@dataclass(frozen=True)
class FailedRecord:
    """One failure record as read back from the instance's failure topic.

    ``data`` is the original Kinesis record (the Kafka value; for a record
    too large for the topic, the original read back from the claim-check store
    its ``original_uri`` header names, checked against ``original_bytes`` and
    ``original_sha256``: :mod:`scripts.reprocess.claim_check`), ``reason`` the
    job's failure reason (``reason`` header, one of ``model.record.REASONS``),
    ``headers`` every header decoded as UTF-8 (``stream``, ``shard``,
    ``sequence_number``, ``partition_key``, ``arrival_time``, ``exception``,
    ``message``, ``instance``: ``job.sinks.kafka.record_headers``). ``key`` is
    ``stream/shard/sequenceNumber``; ``partition``/``offset`` say where it sits
    on the topic, ``timestamp_ms`` is the Kafka record timestamp.
    """

    data: bytes
    reason: str
    headers: tuple[tuple[str, str], ...]
    key: str
    partition: int
    offset: int
    timestamp_ms: int | None = None

    def header(self, name: str) -> str | None:
        """The first header called ``name``, or None."""
        return next((value for key, value in self.headers if key == name), None)

    @property
    def partition_key(self) -> str:
        """The Kinesis partition key to re-send with: the original one (so the
        record lands on the shard its neighbours use), else the topic key."""
        return self.header("partition_key") or self.key

    @property
    def arrival_time(self) -> str | None:
        """When Kinesis first accepted the record (ISO-8601, UTC)."""
        return self.header(ARRIVAL_HEADER)

    @property
    def coordinates(self) -> str:
        """``partition:offset``, what ``--from-offset`` takes to re-read it."""
        return f"{self.partition}:{self.offset}"


def decode_headers(raw: list[tuple[str, bytes | str | None]] | None) -> tuple[tuple[str, str], ...]:
    """Kafka headers as text (the job writes UTF-8; anything else is replaced)."""
    decoded: list[tuple[str, str]] = []
    for name, value in raw or []:
        if value is None:
            text = ""
        elif isinstance(value, bytes):
            text = value.decode("utf-8", errors="replace")
        else:
            text = value
        decoded.append((name, text))
    return tuple(decoded)


def reason_of(headers: tuple[tuple[str, str], ...]) -> str:
    return next((value for key, value in headers if key == REASON_HEADER), "")


Fix = Callable[[FailedRecord], bytes | None]


def identity(record: FailedRecord) -> bytes:
    """No hook: re-send the original bytes (the fix is in the job, e.g. a new schema)."""
    return record.data


def load_hook(spec: str) -> Fix:
    """``package.module:callable`` -> the callable; a clear error otherwise."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise HookError(f"--fix {spec!r}: expected module:callable, e.g. fixes.orders:repair")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise HookError(f"--fix {spec!r}: cannot import {module_name!r}: {exc}") from exc
    target: object = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise HookError(f"--fix {spec!r}: {module_name} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise HookError(f"--fix {spec!r}: {attribute} is not callable")
    hook: Fix = target
    return hook


@dataclass(frozen=True)
class Fixed:
    """The bytes to re-send."""

    data: bytes


@dataclass(frozen=True)
class Refused:
    """The hook refused the record; ``why`` goes in the report."""

    why: str


def apply_fix(fix: Fix, record: FailedRecord) -> Fixed | Refused:
    """Run the hook on one record: its bytes, its refusal, or a HookError."""
    try:
        result = fix(record)
    except Reject as exc:
        return Refused(str(exc) or "rejected by the hook")
    except Exception as exc:
        raise HookError(
            f"fix hook raised {type(exc).__name__} on record {record.coordinates} "
            f"(key {record.key}, reason {record.reason}): {exc}; "
            "raise scripts.reprocess.hook.Reject to refuse a record"
        ) from exc
    if result is None:
        return Refused("the hook returned None")
    if not isinstance(result, bytes | bytearray):
        raise HookError(
            f"fix hook returned {type(result).__name__} for record {record.coordinates} "
            f"(key {record.key}); expected bytes, or None / Reject to refuse it"
        )
    return Fixed(bytes(result))
