"""The claim-check store: a failure record's original bytes, kept by its place
in the stream (:func:`model.claim_check.object_key`).

On AWS a prefix of the instance's data bucket (``s3://<data>/failures/<instance>/``;
the job role may only ``PutObject`` there, ``infra/constructs/buckets.py``);
locally a directory, or a bucket on the S3 emulator, as the job's checkpoint
is (:mod:`model.storage_uri`). A put returns only once the object is stored: S3
answers a PutObject after it stored the object whole, and the request carries
the SHA-256 of the bytes, so S3 refuses bytes that changed on the way ("If the
checksum value calculated by S3 matches your provided value, the request is
accepted",
https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity-upload.html).
The job writes the object before it sends the pointer to Kafka, in the same
task. The same key is written again on a replay: the data bucket is
versioned, so the earlier version stays for the bucket's noncurrent-version
expiry.

Every S3 call is bounded (:data:`model.aws_clients.FAILURE_STORE_S3`); a put that
still fails fails the task, hence the batch, as a Kafka outage does.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from model.aws_clients import FAILURE_STORE_S3, client
from model.storage_uri import is_s3, local_path, parse_s3_uri

# Sidecar of a local object: what S3 keeps as the object's user metadata.
LOCAL_METADATA_SUFFIX: Final = ".metadata.json"
# S3 user metadata is at most 2 KB in all
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingMetadata.html):
# each value is cut to this many characters.
_METADATA_VALUE_CHARS: Final = 256


class FailureStoreError(RuntimeError):
    """The original could not be stored or read back."""


@dataclass(frozen=True)
class FailureStoreSettings:
    """Where originals go (picklable: executors build their client from it).
    ``location`` is an ``s3://bucket/prefix/`` URI or a local directory."""

    location: str
    region: str
    endpoint_url: str | None = None

    def uri(self, key: str) -> str:
        """The full URI (or local path) of the object ``key`` below the location."""
        return f"{self.location.rstrip('/')}/{key}"


def _ascii(value: str) -> str:
    """S3 user metadata travels as HTTP headers: ASCII only."""
    return value.encode("ascii", errors="replace").decode("ascii")[:_METADATA_VALUE_CHARS]


def metadata(values: Mapping[str, str]) -> dict[str, str]:
    """User metadata as S3 accepts it (ASCII, bounded)."""
    return {name: _ascii(value) for name, value in values.items()}


class FailureStore:
    """Puts and gets originals; ``s3_factory`` makes the S3 client (tests pass a fake)."""

    def __init__(
        self,
        settings: FailureStoreSettings,
        s3_factory: Callable[[FailureStoreSettings], Any] | None = None,
    ) -> None:
        self.settings = settings
        self._s3_factory = s3_factory or _s3_client
        self._s3: Any = None

    def _client(self) -> Any:
        if self._s3 is None:
            self._s3 = self._s3_factory(self.settings)
        return self._s3

    def put(self, key: str, data: bytes, sha256_hex: str, meta: Mapping[str, str]) -> str:
        """Store ``data`` at ``key``; returns its URI once stored."""
        uri = self.settings.uri(key)
        try:
            if is_s3(uri):
                bucket, object_key = parse_s3_uri(uri)
                self._client().put_object(
                    Bucket=bucket,
                    Key=object_key,
                    Body=data,
                    ChecksumSHA256=base64.b64encode(bytes.fromhex(sha256_hex)).decode("ascii"),
                    ContentType="application/octet-stream",
                    Metadata=metadata(meta),
                )
            else:
                _write_local(Path(local_path(uri)), data, metadata(meta))
        except Exception as exc:
            raise FailureStoreError(
                f"claim-check put {uri} ({len(data):,} bytes) failed: {exc}"
            ) from exc
        return uri

    def get(self, uri: str) -> bytes:
        """The bytes at ``uri`` (an ``s3://`` URI or a local path)."""
        try:
            if is_s3(uri):
                bucket, object_key = parse_s3_uri(uri)
                body = self._client().get_object(Bucket=bucket, Key=object_key)["Body"]
                return bytes(body.read())
            return Path(local_path(uri)).read_bytes()
        except Exception as exc:
            raise FailureStoreError(f"claim-check get {uri} failed: {exc}") from exc


def _write_local(path: Path, data: bytes, meta: Mapping[str, str]) -> None:
    """Write-then-rename (a reader never sees half an object), fsynced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for target, content in (
        (path, data),
        (path.with_name(path.name + LOCAL_METADATA_SUFFIX), json.dumps(dict(meta)).encode()),
    ):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _s3_client(settings: FailureStoreSettings) -> Any:
    return client(
        "s3", FAILURE_STORE_S3, region=settings.region, endpoint_url=settings.endpoint_url
    )


# The Python worker's stores (one S3 client per settings, kept between tasks).
_WORKER_STORES: dict[FailureStoreSettings, FailureStore] = {}


def worker_store(settings: FailureStoreSettings) -> FailureStore:
    """The store of ``settings`` kept in this process (a client costs tens of
    milliseconds to make; a Python worker runs many tasks)."""
    store = _WORKER_STORES.get(settings)
    if store is None:
        store = _WORKER_STORES[settings] = FailureStore(settings)
    return store
