"""``model.kinesis_offsets``: which shards a batch may read."""

from __future__ import annotations

from model.kinesis_offsets import ShardInfo, ShardState, readable_shards


def test_child_waits_until_every_listed_parent_is_done() -> None:
    shards = [
        ShardInfo("p1", closed=True),
        ShardInfo("p2", closed=True),
        ShardInfo("c", parents=("p1", "p2")),
        ShardInfo("orphan", parents=("expired",)),
    ]
    states = {"p1": ShardState(done=True), "p2": ShardState(after="5")}
    assert [s.shard_id for s in readable_shards(states, shards)] == ["orphan", "p2"]
    states["p2"] = ShardState(after="9", done=True)
    assert [s.shard_id for s in readable_shards(states, shards)] == ["c", "orphan"]
