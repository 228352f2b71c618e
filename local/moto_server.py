"""moto server with Kinesis resharding that behaves like Kinesis.

moto 5.2.5 deviates from Kinesis in two ways that make any exactly-once reader
look broken after a shard split:

* ``SplitShard`` *moves* the parent's records into the children, re-put with
  new sequence numbers (Kinesis leaves them in the closed parent, readable
  until retention expires, and the children start empty);
* ``PutRecord(s)`` keeps routing keys to the first shard whose hash range
  matches, which is the closed parent (Kinesis only writes to open shards).
  Its range check also excludes each shard's ``EndingHashKey``.

``python -m local.moto_server`` patches exactly those two methods and then
runs moto's own server entry point; every other API is stock moto.
"""

from __future__ import annotations

import hashlib
import sys
from typing import Any


def _split_shard(self: Any, shard_to_split: str, new_starting_hash_key: str) -> None:
    from moto.kinesis import models
    from moto.kinesis.exceptions import InvalidArgumentError

    parent = self.shards[shard_to_split]
    boundary = int(new_starting_hash_key)
    if not parent.starting_hash < boundary <= parent.ending_hash:
        raise InvalidArgumentError(
            message=f"NewStartingHashKey {boundary} is outside shard {shard_to_split}'s range"
        )
    if not parent.is_open:
        raise InvalidArgumentError(
            message=f"Shard {shard_to_split} has already been merged or split"
        )
    first = max(shard._shard_id for shard in self.shards.values()) + 1
    left = models.Shard(first, parent.starting_hash, boundary - 1, parent=parent.shard_id)
    right = models.Shard(first + 1, boundary, parent.ending_hash, parent=parent.shard_id)
    self.shards = {**self.shards, left.shard_id: left, right.shard_id: right}
    parent.is_open = False  # records stay in the parent, readable to its end


def _shard_for_key(self: Any, partition_key: str, explicit_hash_key: str) -> Any:
    from moto.kinesis.exceptions import InvalidArgumentError

    if not isinstance(partition_key, str) or len(partition_key) > 256:
        raise InvalidArgumentError("partition_key")
    if explicit_hash_key:
        key = int(explicit_hash_key)
        if key >= 2**128:
            raise InvalidArgumentError("explicit_hash_key")
    else:
        key = int(hashlib.md5(partition_key.encode("utf-8")).hexdigest(), 16)
    for shard in self.shards.values():
        if shard.is_open and shard.starting_hash <= key <= shard.ending_hash:
            return shard
    return None


def patch_kinesis() -> None:
    from moto.kinesis import models

    models.Stream.split_shard = _split_shard  # type: ignore[method-assign]
    models.Stream.get_shard_for_key = _shard_for_key  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> None:
    patch_kinesis()
    from moto.server import main as moto_main

    moto_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
