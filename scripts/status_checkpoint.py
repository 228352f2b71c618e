"""The job's committed position per shard, read from its Spark checkpoint.

Spark's streaming checkpoint keeps one file per batch in ``offsets/`` (written
when the batch is planned: a version line, the batch metadata, then one line
per source with the source's end offset of that batch) and in ``commits/``
(written once the batch's sink finished). The last batch with a commit is the
last one whose output is in the table; a higher ``offsets/`` file without a
commit is the batch running (or interrupted) now.

What a source's offset line means depends on the reader:

* ``python-kinesis`` (:mod:`app.sources.kinesis_offsets`, parsed with its own
  :func:`~app.sources.kinesis_offsets.offsets_from_json`): the batch's *end*,
  i.e. the last sequence number handed to Spark per shard. Exact.
* ``aws-kinesis`` (the awslabs connector on EMR: ``{"metadata": {...},
  "shardId-…": {"iteratorType", "iteratorPosition", …}}``): the connector
  plans a batch from the previous batch's shard metadata, which it keeps in
  its own files, so Spark's offset of batch N is where batch N *started*. The
  lag read from it is an upper bound, at most one batch too high.

The parsing is pure; :class:`CheckpointFiles` is the only I/O (local path or
``s3://``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from app.checkpoint_state import batch_ids
from app.sources.kinesis_offsets import offsets_from_json
from app.storage_uri import is_s3, local_path, parse_s3_uri

OFFSETS_DIR: Final = "offsets"
COMMITS_DIR: Final = "commits"
PYTHON_KINESIS: Final = "python-kinesis"
AWS_KINESIS: Final = "aws-kinesis"

# GetShardIterator's iterator types
# (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_GetShardIterator.html)
# plus SHARD_END: a closed shard read to its end.
AFTER: Final = "AFTER_SEQUENCE_NUMBER"
AT: Final = "AT_SEQUENCE_NUMBER"
AT_TIMESTAMP: Final = "AT_TIMESTAMP"
TRIM_HORIZON: Final = "TRIM_HORIZON"
LATEST: Final = "LATEST"
SHARD_END: Final = "SHARD_END"


class CheckpointError(ValueError):
    """A checkpoint that is missing or cannot be read; the message names the path."""


@dataclass(frozen=True)
class Position:
    """Where the job's next read of a shard starts."""

    kind: str
    sequence: str | None = None
    timestamp: float | None = None  # epoch seconds, for AT_TIMESTAMP

    def iterator_args(self) -> dict[str, Any]:
        """GetShardIterator arguments for this position (not for SHARD_END)."""
        args: dict[str, Any] = {"ShardIteratorType": self.kind}
        if self.kind in (AFTER, AT):
            args["StartingSequenceNumber"] = self.sequence
        elif self.kind == AT_TIMESTAMP:
            args["Timestamp"] = datetime.fromtimestamp(self.timestamp or 0.0, UTC)
        return args

    def describe(self) -> str:
        if self.kind == AFTER:
            return f"after {self.sequence}"
        if self.kind == AT:
            return f"at {self.sequence}"
        if self.kind == AT_TIMESTAMP:
            stamp = datetime.fromtimestamp(self.timestamp or 0.0, UTC)
            return f"from {stamp:%Y-%m-%dT%H:%M:%S}Z"
        if self.kind == SHARD_END:
            return "done (closed, read to its end)"
        return self.kind.lower().replace("_", " ")


@dataclass(frozen=True)
class SourceOffset:
    """One batch's offset of the Kinesis source, as positions per shard."""

    format: str
    positions: dict[str, Position]
    is_batch_end: bool  # True: the batch's end (exact); False: its start (upper bound)


def python_kinesis_positions(raw: Mapping[str, Any]) -> dict[str, Position]:
    positions: dict[str, Position] = {}
    for shard, state in offsets_from_json(raw).items():
        if state.done:
            positions[shard] = Position(SHARD_END)
        elif state.after is not None:
            positions[shard] = Position(AFTER, sequence=state.after)
        elif state.ts is not None:
            positions[shard] = Position(AT_TIMESTAMP, timestamp=state.ts)
        else:
            positions[shard] = Position(TRIM_HORIZON)
    return positions


def aws_kinesis_positions(raw: Mapping[str, Any]) -> dict[str, Position]:
    positions: dict[str, Position] = {}
    for shard, info in raw.items():
        if shard == "metadata":
            continue
        if not isinstance(info, Mapping) or "iteratorType" not in info:
            raise ValueError(f"shard {shard!r}: expected {{'iteratorType': ...}}, got {info!r}")
        kind = str(info["iteratorType"]).upper()
        value = str(info.get("iteratorPosition") or "")
        if kind in (AFTER, AT):
            positions[shard] = Position(kind, sequence=value)
        elif kind == AT_TIMESTAMP:
            positions[shard] = Position(kind, timestamp=int(value) / 1000.0)
        elif kind in (TRIM_HORIZON, LATEST, SHARD_END):
            positions[shard] = Position(kind)
        else:
            raise ValueError(f"shard {shard!r}: unknown iteratorType {kind!r}")
    return positions


def source_offset(raw: Any) -> SourceOffset:
    """The positions in one source offset line, whichever reader wrote it."""
    if isinstance(raw, Mapping) and "shards" in raw:
        return SourceOffset(PYTHON_KINESIS, python_kinesis_positions(raw), is_batch_end=True)
    if isinstance(raw, Mapping) and isinstance(raw.get("metadata"), Mapping):
        return SourceOffset(AWS_KINESIS, aws_kinesis_positions(raw), is_batch_end=False)
    raise ValueError(
        "expected a python-kinesis offset {'shards': {...}} or an aws-kinesis offset "
        f"{{'metadata': {{...}}, 'shardId-…': {{...}}}}, got {str(raw)[:200]}"
    )


def parse_offsets_file(text: str, where: str) -> SourceOffset:
    """``offsets/N``: ``v1``, the batch metadata, one line per source (one here)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise CheckpointError(
            f"{where}: expected a version line, batch metadata and a source offset, "
            f"got {len(lines)} line(s)"
        )
    if len(lines) > 3:
        raise CheckpointError(f"{where}: {len(lines) - 2} sources; expected one (Kinesis)")
    try:
        return source_offset(json.loads(lines[2]))
    except ValueError as exc:
        raise CheckpointError(f"{where}: {exc}") from exc


@dataclass(frozen=True)
class Batches:
    committed: int | None  # the last batch whose sink finished
    planned: int | None  # a later batch with offsets but no commit (running now)


def last_batches(offset_ids: Iterable[int], commit_ids: Iterable[int]) -> Batches:
    offsets, commits = sorted(offset_ids), sorted(commit_ids)
    committed = commits[-1] if commits else None
    planned = offsets[-1] if offsets and (committed is None or offsets[-1] > committed) else None
    return Batches(committed, planned)


@dataclass(frozen=True)
class CheckpointState:
    location: str
    batches: Batches
    offset: SourceOffset | None  # of the last committed batch
    committed_at: datetime | None  # when its commit file was written


class CheckpointFiles:
    """Lists and reads a checkpoint's batch files on a local path or S3."""

    def __init__(self, location: str, s3: Any = None) -> None:
        self.location = location.rstrip("/")
        self._s3 = s3

    def path(self, directory: str, name: str = "") -> str:
        return f"{self.location}/{directory}/{name}" if name else f"{self.location}/{directory}"

    def exists(self) -> bool:
        if is_s3(self.location):
            bucket, key = parse_s3_uri(self.location + "/")
            found = self._s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)
            return bool(found.get("KeyCount", 0))
        return Path(local_path(self.location)).is_dir()

    def names(self, directory: str) -> dict[str, datetime]:
        """File name -> last modified, in ``<checkpoint>/<directory>``."""
        if is_s3(self.location):
            bucket, prefix = parse_s3_uri(self.path(directory) + "/")
            found: dict[str, datetime] = {}
            pages = self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, Delimiter="/"
            )
            for page in pages:
                for item in page.get("Contents", []):
                    found[item["Key"][len(prefix) :]] = item["LastModified"]
            return found
        folder = Path(local_path(self.path(directory)))
        if not folder.is_dir():
            return {}
        return {
            p.name: datetime.fromtimestamp(p.stat().st_mtime, UTC)
            for p in folder.iterdir()
            if p.is_file()
        }

    def read(self, directory: str, name: str) -> str:
        where = self.path(directory, name)
        if is_s3(where):
            bucket, key = parse_s3_uri(where)
            return str(self._s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8"))
        return Path(local_path(where)).read_text(encoding="utf-8")


def read_checkpoint(files: CheckpointFiles) -> CheckpointState:
    """The last committed batch and its offset. A checkpoint without any
    ``offsets/`` file (never started, or a wrong location) is an error naming it."""
    offsets = files.names(OFFSETS_DIR)
    if not files.exists() or not batch_ids(list(offsets)):
        raise CheckpointError(
            f"checkpoint {files.location}: missing (no {OFFSETS_DIR}/ batch files there); "
            "the job has not planned a batch yet (never started here, or still starting)"
        )
    commits = files.names(COMMITS_DIR)
    batches = last_batches(batch_ids(list(offsets)), batch_ids(list(commits)))
    if batches.committed is None:
        return CheckpointState(files.location, batches, None, None)
    name = str(batches.committed)
    if name not in offsets:
        raise CheckpointError(
            f"checkpoint {files.location}: {COMMITS_DIR}/{name} has no {OFFSETS_DIR}/{name}"
        )
    offset = parse_offsets_file(files.read(OFFSETS_DIR, name), files.path(OFFSETS_DIR, name))
    return CheckpointState(files.location, batches, offset, commits.get(name))
