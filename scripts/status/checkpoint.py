"""The job's committed position per shard, read from its Spark checkpoint.

Spark's streaming checkpoint keeps one file per batch in ``offsets/`` (written
when the batch is planned: a version line, the batch metadata, then one line
per source with the source's end offset of that batch) and in ``commits/``
(written once the batch's sink finished). The last batch with a commit is the
last one whose output is in the table; a higher ``offsets/`` file without a
commit is the batch running (or interrupted) now.

What a source's offset line means depends on the reader:

* ``python-kinesis`` (:mod:`model.kinesis_plan`): executors read the
  shards and record each batch's ends under the checkpoint
  (``_kinesis_ends/``), so the offset of batch N (``{"v": 2, "batch": N,
  "shards": ...}``) is where batch N *started*; with the recorded ends
  applied (:func:`with_recorded_ends`) it is the batch's *end*, exact. If an
  end cannot be read, the start is shown and the lag is an upper bound. An
  offset without ``"v"`` was written by the earlier driver-side reader: the
  batch's end, exact.
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

from model.checkpoint_state import COMMITS_DIR, batch_ids
from model.checkpoint_state import CheckpointFiles as JobCheckpointFiles
from model.config import KINESIS_ENDS_DIR
from model.kinesis_ends import ShardEnd
from model.kinesis_offsets import offsets_from_json
from model.kinesis_plan import BatchOffset, resolve
from model.storage_uri import is_s3, local_path
from scripts.command import EXIT_USAGE, OperatorError

OFFSETS_DIR: Final = "offsets"
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


class CheckpointError(OperatorError):
    """A checkpoint that is missing or cannot be read; the message names the path."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_USAGE, message)


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
        ends = "v" not in raw  # the driver-side reader's offsets were batch ends
        return SourceOffset(PYTHON_KINESIS, python_kinesis_positions(raw), is_batch_end=ends)
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


class CheckpointFiles(JobCheckpointFiles):
    """A checkpoint's files as the job itself lists and reads them
    (:class:`model.checkpoint_state.CheckpointFiles`: a local path or an ``s3://``
    prefix), plus when a file was written."""

    def modified(self, *parts: str) -> datetime:
        if is_s3(self.location):
            key = self._prefix + "/".join(parts)
            stamp: datetime = self._s3.head_object(Bucket=self._bucket, Key=key)["LastModified"]
            return stamp
        path = Path(local_path(self.location), *parts)
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def read_checkpoint(files: CheckpointFiles) -> CheckpointState:
    """The last committed batch and its offset. A checkpoint without any
    ``offsets/`` file (never started, or a wrong location) is an error naming it."""
    offsets = batch_ids(files.children(OFFSETS_DIR)[1])
    if not offsets:
        raise CheckpointError(
            f"checkpoint {files.location}: missing (no {OFFSETS_DIR}/ batch files there); "
            "the job has not planned a batch yet (never started here, or still starting)"
        )
    batches = last_batches(offsets, batch_ids(files.children(COMMITS_DIR)[1]))
    if batches.committed is None:
        return CheckpointState(files.location, batches, None, None)
    name = str(batches.committed)
    if batches.committed not in offsets:
        raise CheckpointError(
            f"checkpoint {files.location}: {COMMITS_DIR}/{name} has no {OFFSETS_DIR}/{name}"
        )
    text = files.read(OFFSETS_DIR, name).decode("utf-8")
    offset = parse_offsets_file(text, files.uri(OFFSETS_DIR, name))
    offset = with_recorded_ends(offset, text, files)
    return CheckpointState(files.location, batches, offset, files.modified(COMMITS_DIR, name))


def with_recorded_ends(offset: SourceOffset, text: str, files: CheckpointFiles) -> SourceOffset:
    """A ``python-kinesis`` offset (where its batch started) with the ends its
    tasks recorded under ``_kinesis_ends/`` applied: the batch's exact end.
    Unchanged when an end is missing (a batch still running) or unreadable."""
    if offset.format != PYTHON_KINESIS or offset.is_batch_end:
        return offset
    raw = json.loads([line for line in text.splitlines() if line.strip()][2])

    def end_of(batch: int, shard: str) -> ShardEnd | None:
        where = files.uri(KINESIS_ENDS_DIR, str(batch), f"{shard}.json")
        try:
            body = files.read(KINESIS_ENDS_DIR, str(batch), f"{shard}.json")
        except Exception:  # absent (local OSError, S3 NoSuchKey) or unreachable
            return None
        return ShardEnd.from_json(json.loads(body), where)

    try:
        ends = resolve(BatchOffset.from_json(raw), end_of).positions
    except (RuntimeError, ValueError):
        return offset
    shards = {shard: state.to_json() for shard, state in ends.items()}
    return SourceOffset(PYTHON_KINESIS, python_kinesis_positions({"shards": shards}), True)
