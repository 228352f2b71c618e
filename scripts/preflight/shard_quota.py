"""The account's Kinesis shard (or on-demand stream) quota has room for the
instance's stream (``DescribeLimits``)."""

from __future__ import annotations

from infra.config import InstanceConfig
from scripts.preflight.result import Clients, Result, error_text, iam_fix


def check_shard_quota(config: InstanceConfig, clients: Clients) -> Result:
    name = "Kinesis capacity"
    try:
        limits = clients["kinesis"].describe_limits()
    except Exception as exc:
        return Result(
            name,
            False,
            f"DescribeLimits failed: {error_text(exc)}",
            iam_fix("kinesis:DescribeLimits"),
        )
    if config.stream.on_demand:
        used = limits.get("OnDemandStreamCount", 0)
        limit = limits.get("OnDemandStreamCountLimit", 0)
        if used + 1 > limit:
            return Result(
                name,
                False,
                f"{used} of {limit} on-demand streams in use",
                "request a higher on-demand stream quota, or set stream.shard_count",
            )
        return Result(name, True, f"{used} of {limit} on-demand streams in use")
    needed = config.stream.shard_count or 0
    used, limit = limits.get("OpenShardCount", 0), limits.get("ShardLimit", 0)
    if used + needed > limit:
        return Result(
            name,
            False,
            f"{needed} shards needed, {limit - used} free ({used} of {limit} open)",
            "request a higher Kinesis shard quota (Service Quotas) or lower stream.shard_count",
        )
    return Result(name, True, f"{needed} shards needed, {limit - used} free")
