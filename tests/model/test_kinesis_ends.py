"""``model.kinesis_ends``: the recorded batch ends are written once, on the local
file system and on S3 (moto in-process, conditional PutObject)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from model.kinesis_ends import LocalEndStore, ShardEnd, open_store
from model.kinesis_offsets import ShardState
from tests.job.sources.test_kinesis_python import A_SHARD


def test_recorded_ends_are_write_once_on_the_local_file_system(tmp_path: Path) -> None:
    store = LocalEndStore(tmp_path / "ends")
    first = ShardEnd(ShardState(after="17"), caught_up=True, records=3)
    assert store.put_once(4, A_SHARD, first) == first
    assert store.put_once(4, A_SHARD, ShardEnd(ShardState(after="99"), False, 9)) == first
    assert store.get(4, A_SHARD) == first and store.get(5, A_SHARD) is None
    assert [p.name for p in (tmp_path / "ends" / "4").iterdir()] == [f"{A_SHARD}.json"]
    store.put_once(9, A_SHARD, first)
    store.purge_before(5)
    assert store.get(4, A_SHARD) is None and store.get(9, A_SHARD) == first


def test_recorded_ends_are_write_once_on_s3() -> None:
    """Conditional PutObject (If-None-Match: *) against moto's S3."""
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="data")
        _write_once_on(open_store("s3://data/cp/_kinesis_ends/", client))
        keys = [o["Key"] for o in client.list_objects_v2(Bucket="data")["Contents"]]
        assert keys == [f"cp/_kinesis_ends/7/{A_SHARD}.json"]


def _write_once_on(store: Any) -> None:
    first = ShardEnd(ShardState(after="17", done=True), caught_up=True, records=3)
    assert store.put_once(0, A_SHARD, first) == first
    assert store.put_once(0, A_SHARD, ShardEnd(ShardState(after="99"), False, 9)) == first
    assert store.get(0, A_SHARD) == first and store.get(1, A_SHARD) is None
    store.put_once(7, A_SHARD, first)
    store.purge_before(3)
    assert store.get(0, A_SHARD) is None and store.get(7, A_SHARD) == first
