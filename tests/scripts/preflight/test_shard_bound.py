"""scripts.preflight.shard_bound: the account's real shard quota against the
bound synth puts on ``stream.shard_count``."""

from __future__ import annotations

from scripts.preflight import shard_bound
from tests.scripts.preflight.stubs import Stub, _config


def _check(limit: int, **stream: int) -> shard_bound.Result:
    kinesis = Stub(describe_limits={"ShardLimit": limit, "OpenShardCount": 0})
    return shard_bound.check_shard_bound(_config(stream=stream), {"kinesis": kinesis})


def test_the_default_quota_of_an_account_that_has_it_passes() -> None:
    result = _check(20_000, shard_count=2)
    assert result.status == "PASS"
    assert result.detail == (
        "synth allows at most 20,000 shards (the default quota of eu-west-1); "
        "the account's quota is 20,000"
    )


def test_a_higher_real_quota_is_a_warning_that_prints_the_value_to_set() -> None:
    result = _check(50_000, shard_count=2)
    assert result.status == "WARN"
    assert "set stream.shard_quota to 50000" in result.fix
    assert _check(50_000, shard_count=2, shard_quota=50_000).status == "PASS"


def test_a_stated_quota_above_the_real_one_fails() -> None:
    result = _check(20_000, shard_count=2, shard_quota=30_000)
    assert result.status == "FAIL"
    assert "stream.shard_quota 30,000 is above the account's shard quota 20,000" in result.detail


def test_a_refused_call_names_the_permission() -> None:
    kinesis = Stub(describe_limits=RuntimeError("AccessDenied"))
    result = shard_bound.check_shard_bound(_config(), {"kinesis": kinesis})
    assert result.status == "FAIL" and "kinesis:DescribeLimits" in result.fix
