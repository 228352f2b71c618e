"""KPL aggregated records: recognize one and split it into its user records (pure).

The Kinesis Producer Library packs many user records into one Kinesis record
(https://github.com/awslabs/amazon-kinesis-producer/blob/master/aggregation-format.md):

    F3 89 9A C2 | protobuf AggregatedRecord | MD5 of the protobuf (16 bytes)

    message AggregatedRecord {
      repeated string partition_key_table     = 1;
      repeated string explicit_hash_key_table = 2;
      repeated Record records                 = 3;
    }
    message Record {
      required uint64 partition_key_index     = 1;
      optional uint64 explicit_hash_key_index = 2;
      required bytes  data                    = 3;
      repeated Tag    tags                    = 4;
    }

Why a parser of our own instead of awslabs ``aws-kinesis-agg``: that package
needs ``protobuf`` at run time, on every EMR node, for a message of two
varints and three length-delimited fields; its generated ``messages_pb2``
must also match the installed protobuf runtime. This module is the wire
format only, and ``tests/model/test_kpl.py`` checks it against records the
package's aggregator builds.

What counts as readable is what the awslabs readers accept (KCL's and the
``aws-kinesis`` connector's ``AggregatorUtil.deaggregate``, the package's
``iter_deaggregate_records``): the magic, more than 16 bytes after it, a
matching MD5, a protobuf that parses with its required fields. Those readers
hand anything else on as one plain record; so does the ``python-kinesis``
source, and the job's classification then names it ``bad_aggregate``
(:mod:`job.transform`). Two cases the awslabs readers do not reject are
rejected here, so that nothing disappears: an aggregate of zero records
(the readers emit nothing for it) and a record whose key index points past
the key table (the connector logs it and drops the rest of the aggregate).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

MAGIC: Final = b"\xf3\x89\x9a\xc2"
DIGEST_SIZE: Final = 16

# Protobuf wire types (https://protobuf.dev/programming-guides/encoding/).
_VARINT: Final = 0
_FIXED64: Final = 1
_LENGTH: Final = 2
_FIXED32: Final = 5
_MAX_VARINT_BYTES: Final = 10


class AggregateError(ValueError):
    """The bytes start with the KPL magic but are not a readable aggregate."""


@dataclass(frozen=True)
class UserRecord:
    """One user record of an aggregate; ``sub_sequence_number`` is its index
    in the aggregate, as KCL and the awslabs connector number them (0, 1, ...)."""

    data: bytes
    partition_key: str
    explicit_hash_key: str | None
    sub_sequence_number: int


def is_aggregate(data: bytes) -> bool:
    """Starts with the magic: an aggregate, readable or not."""
    return data[: len(MAGIC)] == MAGIC


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = 0
    for shift in range(0, 7 * _MAX_VARINT_BYTES, 7):
        if pos >= len(buf):
            raise AggregateError("protobuf ends inside a varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise AggregateError("protobuf varint longer than 10 bytes")


def _fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of one message, in order; unknown
    fields of the scalar wire types are returned too (and ignored by callers)."""
    out: list[tuple[int, int, int | bytes]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise AggregateError("protobuf field number 0")
        value: int | bytes
        if wire == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire == _LENGTH:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise AggregateError("protobuf ends inside a length-delimited field")
            value, pos = buf[pos : pos + size], pos + size
        elif wire in (_FIXED64, _FIXED32):
            width = 8 if wire == _FIXED64 else 4
            if pos + width > len(buf):
                raise AggregateError("protobuf ends inside a fixed-width field")
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        else:  # groups (3, 4) and the reserved 6, 7: not in this message
            raise AggregateError(f"protobuf wire type {wire} in an AggregatedRecord")
        out.append((number, wire, value))
    return out


def _text(value: int | bytes, what: str) -> str:
    if not isinstance(value, bytes):
        raise AggregateError(f"{what}: not a length-delimited field")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AggregateError(f"{what}: not UTF-8") from exc


def _record(buf: bytes) -> tuple[int, int | None, bytes]:
    """``(partition key index, explicit hash key index, data)`` of one Record."""
    pk_index: int | None = None
    ehk_index: int | None = None
    data: bytes | None = None
    for number, wire, value in _fields(buf):
        if number == 1 and wire == _VARINT:
            assert isinstance(value, int)
            pk_index = value
        elif number == 2 and wire == _VARINT:
            assert isinstance(value, int)
            ehk_index = value
        elif number == 3 and wire == _LENGTH:
            assert isinstance(value, bytes)
            data = value
        elif number in (1, 2, 3):
            raise AggregateError(f"Record field {number} has wire type {wire}")
    if pk_index is None or data is None:
        raise AggregateError("Record lacks a required field (partition_key_index, data)")
    return pk_index, ehk_index, data


def deaggregate(data: bytes) -> list[UserRecord]:
    """The user records of a KPL aggregate, in order. Raises
    :class:`AggregateError` when ``data`` is not a readable aggregate
    (call it only when :func:`is_aggregate` holds)."""
    if not is_aggregate(data):
        raise AggregateError("no KPL magic")
    if len(data) <= len(MAGIC) + DIGEST_SIZE:
        raise AggregateError("too short to hold an MD5")
    message, digest = data[len(MAGIC) : -DIGEST_SIZE], data[-DIGEST_SIZE:]
    if hashlib.md5(message, usedforsecurity=False).digest() != digest:
        raise AggregateError("MD5 does not match")
    keys: list[str] = []
    hash_keys: list[str] = []
    raw_records: list[bytes] = []
    for number, wire, value in _fields(message):
        if number in (1, 2, 3) and wire != _LENGTH:
            raise AggregateError(f"AggregatedRecord field {number} has wire type {wire}")
        if number == 1:
            keys.append(_text(value, "partition key"))
        elif number == 2:
            hash_keys.append(_text(value, "explicit hash key"))
        elif number == 3:
            assert isinstance(value, bytes)
            raw_records.append(value)
    if not raw_records:
        raise AggregateError("no user records")
    out: list[UserRecord] = []
    for index, raw in enumerate(raw_records):
        pk_index, ehk_index, payload = _record(raw)
        if pk_index >= len(keys):
            raise AggregateError(
                f"record {index}: partition key index {pk_index} outside a table of {len(keys)}"
            )
        if ehk_index is not None and ehk_index >= len(hash_keys):
            raise AggregateError(
                f"record {index}: explicit hash key index {ehk_index} outside a table "
                f"of {len(hash_keys)}"
            )
        explicit = hash_keys[ehk_index] if ehk_index is not None else None
        out.append(UserRecord(payload, keys[pk_index], explicit, index))
    return out
