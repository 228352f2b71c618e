"""The claim-check decision and the pointer a failure record carries (pure).

A failure record whose original bytes would make its Kafka message larger
than :attr:`model.failure_limits.FailureLimits.inline_max_bytes` is sent as a
*pointer*: its original goes to the claim-check store first
(:mod:`model.failure_store`, the instance's data bucket under
``failures/``), and the topic gets the same key and headers plus
``original_uri``, ``original_bytes`` and ``original_sha256``, with the first
:data:`model.failure_limits.EXCERPT_BYTES` bytes of the original as its value.
The store's object key is the record's place in the stream, so a replayed
batch overwrites the same object (the AWS re:Post guide to large messages on
MSK recommends this S3 reference pattern:
https://repost.aws/articles/ARfShOOzvBSra6UwgWOz9GXg/handling-large-messages-in-amazon-managed-streaming-for-apache-kafka-msk).

A record the broker or librdkafka refuses for its size or shape (an error no
retry can cure) is claim-checked the same way after the fact, with
``delivery_error`` saying what Kafka answered, so no single record can fail a
batch for ever.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

from model.failure_limits import EXCERPT_BYTES, HEADER_VALUE_MAX_BYTES, FailureLimits

ORIGINAL_URI_HEADER: Final = "original_uri"
ORIGINAL_BYTES_HEADER: Final = "original_bytes"
ORIGINAL_SHA256_HEADER: Final = "original_sha256"
DELIVERY_ERROR_HEADER: Final = "delivery_error"
MISSING: Final = "-"

Headers = list[tuple[str, bytes]]


def bounded(value: bytes, limit: int = HEADER_VALUE_MAX_BYTES) -> bytes:
    """A header value cut to ``limit`` bytes (never mid UTF-8 character)."""
    if len(value) <= limit:
        return value
    cut = value[:limit]
    return cut.decode("utf-8", errors="ignore").encode("utf-8")


def message_size(key: bytes, value: bytes, headers: Sequence[tuple[str, bytes]]) -> int:
    """What librdkafka counts against ``message.max.bytes`` for one message:
    key, value and every header name and value."""
    return len(key) + len(value) + sum(len(n.encode()) + len(v) for n, v in headers)


def fits_inline(size: int, limits: FailureLimits) -> bool:
    """True when a whole message of ``size`` bytes is sent with its original."""
    return size <= limits.inline_max_bytes


def object_key(
    stream: str | None, shard: str | None, sequence: str | None, sub: int | None = None
) -> str:
    """``<stream>/<shard>/<sequence>[/<sub>]`` below the store's prefix: the
    record's place in the stream (and in its KPL aggregate), so a replay writes
    the same object. Each part is percent-encoded (Kinesis names are
    ``[a-zA-Z0-9_.-]``; nothing else can add a level or climb out of the prefix)."""
    parts = [stream, shard, sequence] + ([] if sub is None else [str(sub)])
    return "/".join(quote(part or MISSING, safe="") for part in parts)


@dataclass(frozen=True)
class Pointer:
    """Where a claim-checked original is and how to check it when read back."""

    uri: str
    size: int
    sha256: str

    def headers(self) -> Headers:
        return [
            (ORIGINAL_URI_HEADER, self.uri.encode()),
            (ORIGINAL_BYTES_HEADER, str(self.size).encode()),
            (ORIGINAL_SHA256_HEADER, self.sha256.encode()),
        ]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def excerpt(data: bytes) -> bytes:
    """What a pointer record keeps of the original as its value."""
    return data[:EXCERPT_BYTES]


def pointer_record(
    headers: Sequence[tuple[str, bytes]],
    data: bytes,
    pointer: Pointer,
    delivery_error: str | None = None,
) -> tuple[bytes, Headers]:
    """The value and headers of the pointer record for ``data``."""
    extra = list(pointer.headers())
    if delivery_error:
        extra.append((DELIVERY_ERROR_HEADER, bounded(delivery_error.encode())))
    return excerpt(data), [*headers, *extra]


def pointer_from_headers(headers: Sequence[tuple[str, str]]) -> Pointer | None:
    """The pointer a consumed failure record carries, or None (the value is
    the whole original). A record with ``original_uri`` but a bad size or
    digest raises ValueError: its excerpt must never pass for the original."""
    found = dict(headers)
    uri = found.get(ORIGINAL_URI_HEADER)
    if not uri:
        return None
    size_text = found.get(ORIGINAL_BYTES_HEADER, "")
    digest = found.get(ORIGINAL_SHA256_HEADER, "")
    if not size_text.isdigit() or len(digest) != 64:
        raise ValueError(
            f"claim-check pointer {uri}: bad {ORIGINAL_BYTES_HEADER}={size_text!r} or "
            f"{ORIGINAL_SHA256_HEADER}={digest!r}"
        )
    return Pointer(uri, int(size_text), digest)


def verify(pointer: Pointer, data: bytes) -> None:
    """Raise ValueError unless ``data`` is the original the pointer names."""
    if len(data) != pointer.size or sha256_hex(data) != pointer.sha256:
        raise ValueError(
            f"claim-check object {pointer.uri}: {len(data):,} bytes, sha256 "
            f"{sha256_hex(data)[:16]}...; the pointer says {pointer.size:,} bytes, "
            f"sha256 {pointer.sha256[:16]}..."
        )
