"""The ``python-kinesis`` batch offset and the driver's planning rules (pure).

Executors read the shards, and a bounded read's end is known only once it is
read, so an offset cannot say where its batch ends. It says where the batch
**starts**, and which shards it reads; the end of each shard's read is what
the reading task recorded (:mod:`model.kinesis_ends`). The awslabs
connector's offsets work the same way (``ShardOffsets(batchId, ...)``: the
start positions of batch ``batchId``; the ends in its metadata committer)::

    {"v": 2, "batch": k,
     "shards": {shardId: {"after", "ts", "done"}, ...},   # where batch k starts
     "reads": [{"shard": shardId, "closed": bool}, ...]}  # what batch k reads

Spark asks for the offsets of batch *k + 1* only after batch *k* ran, so every
shard batch *k* read has recorded its end by then: the next start positions
are batch *k*'s with those ends applied (:func:`resolve`). The shards a batch
reads are fixed in its offset, so a replay reads the same shards even if a
reshard listed new ones since.

An offset without ``"v"`` is the previous reader's (a
``SimpleDataSourceStreamReader``): its ``shards`` are the positions *after*
its batch. It reads as a batch ``-1`` that reads nothing, whose positions are
therefore final; a batch between two such offsets is replayed as the exact
ranges ``(start, end]`` per shard, as that reader did. So a checkpoint written
by the driver-side reader resumes with this one, and needs no migration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from model.kinesis_ends import ShardEnd
from model.kinesis_offsets import (
    Offsets,
    ShardInfo,
    ShardState,
    offsets_from_json,
    offsets_to_json,
)

VERSION: Final = 2
# The batch id of an offset no batch has read from: the initial offset and the
# previous reader's offsets.
NO_BATCH: Final = -1


@dataclass(frozen=True)
class BatchOffset:
    batch: int
    shards: Offsets
    reads: tuple[ShardInfo, ...] = ()
    legacy: bool = False

    def to_json(self) -> dict[str, Any]:
        if self.legacy:
            return offsets_to_json(self.shards)
        return {
            "v": VERSION,
            "batch": self.batch,
            **offsets_to_json(self.shards),
            "reads": [{"shard": info.shard_id, "closed": info.closed} for info in self.reads],
        }

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> BatchOffset:
        version = raw.get("v")
        if version is None:
            return BatchOffset(NO_BATCH, offsets_from_json(raw), legacy=True)
        if version != VERSION:
            raise ValueError(
                f"python-kinesis offset: version {version!r} is not {VERSION}; this reader "
                "cannot resume a checkpoint written by a newer one"
            )
        reads = raw.get("reads")
        if not isinstance(reads, list):
            raise ValueError(f"python-kinesis offset: expected a 'reads' list, got {raw!r}")
        return BatchOffset(
            int(raw["batch"]),
            offsets_from_json(raw),
            tuple(ShardInfo(str(item["shard"]), closed=bool(item["closed"])) for item in reads),
        )


@dataclass(frozen=True)
class Resolved:
    """Where the batch after ``batch`` starts, and whether the ends recorded
    say more is waiting (a read stopped by its bound, or a shard finished,
    which may make its children readable)."""

    batch: int
    positions: Offsets
    more: bool


def resolve(offset: BatchOffset, end_of: Callable[[int, str], ShardEnd | None]) -> Resolved:
    """``offset``'s start positions with its batch's recorded ends applied.

    Every shard the batch reads must have recorded an end: Spark plans the
    next batch only after this one's tasks all succeeded, and each task
    records before it returns a row.
    """
    positions = dict(offset.shards)
    more = False
    for info in offset.reads:
        recorded = end_of(offset.batch, info.shard_id)
        if recorded is None:
            raise RuntimeError(
                f"python-kinesis: batch {offset.batch} read shard {info.shard_id} but its end "
                "was never recorded in kinesis.metadataPath (was the path changed or "
                "cleared under a running checkpoint?)"
            )
        before = positions.get(info.shard_id, ShardState())
        positions[info.shard_id] = recorded.end
        more = more or not recorded.caught_up or (recorded.end.done and not before.done)
    return Resolved(offset.batch, positions, more)


@dataclass(frozen=True)
class ShardRead:
    """One shard's part of one task: read from ``start``; ``until`` set only
    when replaying the previous reader's batch (its exact end)."""

    shard: ShardInfo
    start: ShardState
    until: str | None = None


def shard_reads(start: BatchOffset, end: BatchOffset) -> list[ShardRead]:
    """What the batch ``(start, end]`` reads, shard by shard, in shard order."""
    if end.legacy:
        # The previous reader's batch: its start is the offset before it, or
        # (its batch 0) the initial offset Spark asks this reader for.
        return [
            ShardRead(ShardInfo(shard_id), start.shards.get(shard_id, ShardState()), state.after)
            for shard_id, state in sorted(end.shards.items())
            if state.after is not None
            and state.after != start.shards.get(shard_id, ShardState()).after
        ]
    return [
        ShardRead(info, end.shards.get(info.shard_id, ShardState()))
        for info in sorted(end.reads, key=lambda info: info.shard_id)
    ]


def groups(reads: Sequence[ShardRead], tasks: int | None) -> list[list[ShardRead]]:
    """``reads`` in at most ``tasks`` groups (None: one per shard), dealt
    round-robin so each group gets shards of every part of the list."""
    if not reads:
        return []
    count = len(reads) if tasks is None else max(1, min(tasks, len(reads)))
    dealt: list[list[ShardRead]] = [[] for _ in range(count)]
    for index, read in enumerate(reads):
        dealt[index % count].append(read)
    return dealt


def new_shards(positions: Offsets, listed: Iterable[ShardInfo]) -> bool:
    """A listed shard the positions do not track yet (a reshard's child)."""
    return any(info.shard_id not in positions for info in listed)
