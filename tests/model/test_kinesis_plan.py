"""``model.kinesis_plan``: a batch offset round-trips through JSON, and one from
a newer reader or with a lost recorded end fails naming it."""

from __future__ import annotations

import pytest

from model.kinesis_offsets import ShardInfo, ShardState
from model.kinesis_plan import BatchOffset, resolve
from tests.job.source_helpers import MemoryEndStore
from tests.job.sources.test_kinesis_python import A_SHARD


def test_an_offset_of_a_newer_reader_or_a_lost_end_fails_with_its_name() -> None:
    with pytest.raises(ValueError, match="version 3"):
        BatchOffset.from_json({"v": 3, "batch": 1, "shards": {}, "reads": []})
    offset = BatchOffset(4, {A_SHARD: ShardState()}, (ShardInfo(A_SHARD),))
    with pytest.raises(RuntimeError, match=f"batch 4 read shard {A_SHARD}.*never recorded"):
        resolve(offset, MemoryEndStore().get)
    assert BatchOffset.from_json(offset.to_json()) == offset
