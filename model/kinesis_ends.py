"""Where each batch ended, per shard: written once by the task that read it.

Kinesis cannot say where a bounded batch ends before it is read, so the
``python-kinesis`` offset of batch *k* holds the positions the batch starts
from (:mod:`model.kinesis_plan`), and the task that reads a shard in
batch *k* records where it stopped, here, before it hands a row to Spark. The
awslabs connector does the same with its metadata committer (one file per
batch and shard under the checkpoint, ``HDFSMetadataCommitter``); this store
differs in one point: a record is **write-once**. The connector overwrites
(``CreateFlag.OVERWRITE``), so two attempts of one task (a retry racing a
speculative copy) could leave the later one's end while Spark kept the
earlier one's rows. Here the first writer wins and every later attempt reads
exactly the winner's range.

Layout: ``<metadataPath>/<batch id>/<shard id>.json`` holding
``{"end": {after, ts, done}, "caught_up": bool, "records": n}``; ``caught_up``
says the read stopped because the shard had nothing newer (not because of a
record or time bound), which lets the driver skip a batch when nothing
arrived since (see ``kinesis_python``).

Write-once on each medium:

* local path: the record is written to a temporary file and ``os.link``-ed to
  its name, which fails if the name exists (POSIX ``link``: EEXIST), so a
  reader never sees a half-written record;
* ``s3://``: ``PutObject`` with ``If-None-Match: *``; S3 answers 412
  Precondition Failed when the key exists, and 409 ConditionalRequestConflict
  to one of two racing writers (S3 User Guide, "How to prevent object
  overwrites with conditional writes",
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
  S3 reads are strongly consistent after a write
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/Welcome.html#ConsistencyModel).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from botocore.exceptions import ClientError

from model.kinesis_offsets import ShardState
from model.storage_uri import is_missing, is_s3, local_path, parse_s3_uri

# Batches whose ends are kept: Spark's own default for its offset and commit
# logs (spark.sql.streaming.minBatchesToRetain); only the last one is ever
# replayed, the rest are there for an operator to read.
BATCHES_TO_RETAIN: Final = 100


@dataclass(frozen=True)
class ShardEnd:
    """Where one shard's read in one batch stopped."""

    end: ShardState
    caught_up: bool
    records: int

    def to_json(self) -> dict[str, Any]:
        return {"end": self.end.to_json(), "caught_up": self.caught_up, "records": self.records}

    @staticmethod
    def from_json(raw: Mapping[str, Any], where: str) -> ShardEnd:
        end = raw.get("end")
        if not isinstance(end, Mapping):
            raise ValueError(f"{where}: expected {{'end': {{...}}, ...}}, got {raw!r}")
        return ShardEnd(
            ShardState.from_json(end), bool(raw.get("caught_up")), int(raw.get("records", 0))
        )


class EndStore(Protocol):
    def put_once(self, batch: int, shard_id: str, end: ShardEnd) -> ShardEnd:
        """Record ``end`` unless a record exists; the record that stands."""

    def get(self, batch: int, shard_id: str) -> ShardEnd | None: ...

    def purge_before(self, batch: int) -> None:
        """Drop the records of batches below ``batch``."""


def _name(batch: int, shard_id: str) -> str:
    return f"{batch}/{shard_id}.json"


@dataclass(frozen=True)
class LocalEndStore:
    root: Path

    def put_once(self, batch: int, shard_id: str, end: ShardEnd) -> ShardEnd:
        target = self.root / _name(batch, shard_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        try:
            with os.fdopen(handle, "w") as out:
                json.dump(end.to_json(), out)
                out.flush()
                os.fsync(out.fileno())
            os.link(temporary, target)
        except FileExistsError:
            stored = self.get(batch, shard_id)
            if stored is None:  # pragma: no cover - link said it exists
                raise
            return stored
        finally:
            os.unlink(temporary)
        return end

    def get(self, batch: int, shard_id: str) -> ShardEnd | None:
        target = self.root / _name(batch, shard_id)
        try:
            raw = json.loads(target.read_text())
        except FileNotFoundError:
            return None
        return ShardEnd.from_json(raw, str(target))

    def purge_before(self, batch: int) -> None:
        if not self.root.is_dir():
            return
        for child in self.root.iterdir():
            if child.name.isdigit() and int(child.name) < batch:
                shutil.rmtree(child, ignore_errors=True)


@dataclass(frozen=True)
class S3EndStore:
    client: Any
    bucket: str
    prefix: str

    def _key(self, batch: int, shard_id: str) -> str:
        return f"{self.prefix}{_name(batch, shard_id)}"

    def put_once(self, batch: int, shard_id: str, end: ShardEnd) -> ShardEnd:
        body = json.dumps(end.to_json()).encode()
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=self._key(batch, shard_id), Body=body, IfNoneMatch="*"
            )
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code")
            if status not in (409, 412) and code not in (
                "PreconditionFailed",
                "ConditionalRequestConflict",
            ):
                raise
            stored = self.get(batch, shard_id)
            if stored is None:
                raise RuntimeError(
                    f"s3://{self.bucket}/{self._key(batch, shard_id)}: the conditional write "
                    "lost to another writer, whose record cannot be read"
                ) from exc
            return stored
        return end

    def get(self, batch: int, shard_id: str) -> ShardEnd | None:
        key = self._key(batch, shard_id)
        try:
            reply = self.client.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if is_missing(exc):
                return None
            raise
        return ShardEnd.from_json(json.loads(reply["Body"].read()), f"s3://{self.bucket}/{key}")

    def purge_before(self, batch: int) -> None:
        """One listing of batch folders (``Delimiter='/'``), then the old ones'
        keys deleted a page at a time."""
        listing = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, Delimiter="/")
        for common in listing.get("CommonPrefixes", []):
            name = str(common["Prefix"])[len(self.prefix) :].rstrip("/")
            if not (name.isdigit() and int(name) < batch):
                continue
            page = self.client.list_objects_v2(Bucket=self.bucket, Prefix=str(common["Prefix"]))
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys})


def open_store(path: str, s3_client: Any = None) -> EndStore:
    """The store at ``path`` (``s3://bucket/prefix`` or a local directory);
    ``s3_client`` is required for S3."""
    if is_s3(path):
        bucket, key = parse_s3_uri(path)
        if s3_client is None:
            raise ValueError(f"{path}: an S3 client is needed for an s3:// metadata path")
        prefix = key.rstrip("/") + "/" if key else ""
        return S3EndStore(s3_client, bucket, prefix)
    return LocalEndStore(Path(local_path(path)))
