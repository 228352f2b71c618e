"""The originals of claim-checked failure records, for ``python -m scripts.reprocess``.

A failure record too large for the failure topic carries a pointer instead of
its original (``original_uri``, ``original_bytes``, ``original_sha256``;
:mod:`model.claim_check`) and the first KiB of it as its value. Before the
fix-up hook sees such a record, the command reads the original back from the
claim-check store (the instance's data bucket under ``failures/``, or a local
directory) and checks its size and SHA-256, so the hook and the re-send get
the original bytes, never the excerpt. An original that is missing or does
not match its pointer is a failed record: it holds its partition's position
and is listed, like a record Kinesis refused (docs/operate.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from model.claim_check import pointer_from_headers, verify
from model.failure_store import FailureStore, FailureStoreError, FailureStoreSettings
from scripts.reprocess.hook import FailedRecord

Read = Callable[[str], bytes]
Resolve = Callable[[FailedRecord], FailedRecord]


class ClaimCheckError(RuntimeError):
    """The original of a pointer record cannot be read back, or is not the one
    the pointer names."""


def store_reader(region: str, endpoint_url: str | None = None) -> Read:
    """Reads an ``s3://`` URI (bounded client, ``model.aws_clients.FAILURE_STORE_S3``)
    or a local path, as the job wrote it."""
    store = FailureStore(FailureStoreSettings("", region, endpoint_url))
    return store.get


def resolver(read: Read) -> Resolve:
    """The record with its original as ``data`` (records without a pointer
    are returned as they are)."""

    def resolve(record: FailedRecord) -> FailedRecord:
        try:
            pointer = pointer_from_headers(record.headers)
        except ValueError as exc:
            raise ClaimCheckError(str(exc)) from exc
        if pointer is None:
            return record
        try:
            data = read(pointer.uri)
        except FailureStoreError as exc:
            raise ClaimCheckError(str(exc)) from exc
        try:
            verify(pointer, data)
        except ValueError as exc:
            raise ClaimCheckError(str(exc)) from exc
        return dataclasses.replace(record, data=data)

    return resolve


def unchanged(record: FailedRecord) -> FailedRecord:
    return record
