"""Offsets of the ``python-kinesis`` source and the shard-order rules (pure).

An offset is a JSON object ``{"shards": {shardId: state}}``; a shard's state
says where the next read starts and whether the shard is finished:

* ``after``: the last sequence number already handed to Spark (the next read
  starts ``AFTER_SEQUENCE_NUMBER``), or null when nothing was read yet;
* ``ts``: with ``after`` null, start ``AT_TIMESTAMP`` (epoch seconds), which
  is how ``LATEST`` is pinned when the query first starts: a replayed first
  batch then reads exactly the same records, which a bare ``LATEST`` could not;
* neither: start at ``TRIM_HORIZON``;
* ``done``: a closed shard read to its end; its children may start.

A batch reads, per shard, the records in ``(start.after, end.after]``. Kinesis
never changes a shard's records once written (until they expire), so the same
pair of offsets always yields the same records: a replayed batch is identical,
which the job's idempotent sink relies on.

Resharding: a child shard becomes readable only once every parent still listed
by Kinesis is ``done`` in the batch's *start* offset, so a parent's last records
are always in an earlier batch than its children's first ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ShardState:
    after: str | None = None
    ts: float | None = None
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"after": self.after, "ts": self.ts, "done": self.done}

    @staticmethod
    def from_json(raw: Mapping[str, Any]) -> ShardState:
        after = raw.get("after")
        ts = raw.get("ts")
        return ShardState(
            after=None if after is None else str(after),
            ts=None if ts is None else float(ts),
            done=bool(raw.get("done", False)),
        )

    def advanced(self, last_sequence: str | None, done: bool) -> ShardState:
        """The state after reading up to ``last_sequence`` (None: nothing new)."""
        if last_sequence is None:
            return replace(self, done=done)
        return ShardState(after=last_sequence, ts=None, done=done)


@dataclass(frozen=True)
class ShardInfo:
    """What ListShards says about one shard."""

    shard_id: str
    parents: tuple[str, ...] = ()
    closed: bool = False

    @staticmethod
    def from_api(raw: Mapping[str, Any]) -> ShardInfo:
        parents = tuple(
            str(raw[key]) for key in ("ParentShardId", "AdjacentParentShardId") if raw.get(key)
        )
        ending = raw.get("SequenceNumberRange", {}).get("EndingSequenceNumber")
        return ShardInfo(str(raw["ShardId"]), parents, ending is not None)


Offsets = dict[str, ShardState]


def offsets_to_json(offsets: Offsets) -> dict[str, Any]:
    return {"shards": {shard: offsets[shard].to_json() for shard in sorted(offsets)}}


def offsets_from_json(raw: Mapping[str, Any]) -> Offsets:
    shards = raw.get("shards")
    if not isinstance(shards, Mapping):
        raise ValueError(f"python-kinesis offset: expected {{'shards': {{...}}}}, got {raw!r}")
    return {str(shard): ShardState.from_json(state) for shard, state in shards.items()}


def initial_offsets(
    shards: Iterable[ShardInfo], kind: str, now: float, ts: float | None
) -> Offsets:
    """The first start's offsets. ``LATEST`` is pinned to ``now`` as a timestamp
    (see the module docstring); ``AT_TIMESTAMP`` uses ``ts``."""
    if kind == "TRIM_HORIZON":
        state = ShardState()
    elif kind == "LATEST":
        state = ShardState(ts=now)
    elif kind == "AT_TIMESTAMP" and ts is not None:
        state = ShardState(ts=ts)
    else:
        raise ValueError(f"kinesis.startingPosition: unknown kind {kind!r}")
    return {info.shard_id: state for info in shards}


def with_new_shards(offsets: Offsets, shards: Iterable[ShardInfo]) -> Offsets:
    """Shards created after the query started begin at TRIM_HORIZON: every
    record in them arrived after the start."""
    merged = dict(offsets)
    for info in shards:
        merged.setdefault(info.shard_id, ShardState())
    return merged


def readable_shards(offsets: Offsets, shards: Iterable[ShardInfo]) -> list[ShardInfo]:
    """Listed shards that may be read now: not done, and every listed parent
    done. A parent no longer listed has expired; it cannot hold back a child."""
    listed = {info.shard_id: info for info in shards}
    readable = []
    for info in listed.values():
        state = offsets.get(info.shard_id, ShardState())
        if state.done:
            continue
        waiting = [
            parent
            for parent in info.parents
            if parent in listed and not offsets.get(parent, ShardState()).done
        ]
        if not waiting:
            readable.append(info)
    return sorted(readable, key=lambda info: info.shard_id)


def missing_shards(offsets: Offsets, shards: Iterable[ShardInfo]) -> list[str]:
    """Tracked, unfinished shards Kinesis no longer lists: their unread records
    expired (data loss) or the stream was recreated."""
    listed = {info.shard_id for info in shards}
    return sorted(
        shard for shard, state in offsets.items() if not state.done and shard not in listed
    )


def forget_finished(offsets: Offsets, shards: Iterable[ShardInfo]) -> Offsets:
    """Drop finished shards Kinesis no longer lists (expired parents), so the
    offset does not grow with every reshard."""
    listed = {info.shard_id for info in shards}
    return {shard: state for shard, state in offsets.items() if not state.done or shard in listed}


def sequence_key(sequence: str | None) -> int:
    """Sequence numbers are decimal strings of up to 128 bits: compare as ints."""
    return -1 if sequence is None else int(sequence)
