"""scripts.preflight.shard_quota: room for the stream's shards; a refused
call names the permission."""

from __future__ import annotations

from scripts.preflight import shard_quota
from tests.scripts.preflight.stubs import Stub, _config


def test_shard_quota_without_room_fails() -> None:
    limits = {"ShardLimit": 10, "OpenShardCount": 9}
    result = shard_quota.check_shard_quota(
        _config(stream={"shard_count": 2}), {"kinesis": Stub(describe_limits=limits)}
    )
    assert not result.ok and "2 shards needed, 1 free" in result.detail


def test_an_api_error_is_a_fail_naming_the_permission() -> None:
    result = shard_quota.check_shard_quota(
        _config(), {"kinesis": Stub(describe_limits=RuntimeError("AccessDenied"))}
    )
    assert not result.ok and "kinesis:DescribeLimits" in result.fix
