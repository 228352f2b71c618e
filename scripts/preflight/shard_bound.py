"""The upper bound synth puts on ``stream.shard_count`` against the account's
real Kinesis shard quota (``DescribeLimits``' ``ShardLimit``).

Synth is offline, so it bounds the shard count by the Region's default quota
(infra.config ``default_shard_quota``, from
https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html)
unless the instance states its account's quota as ``stream.shard_quota``.
This check reads the real quota: a stated one above it fails (synth would let
through a count CloudFormation cannot create); a real one above the bound
synth uses is a warning that prints the value to set.
"""

from __future__ import annotations

from infra.config import InstanceConfig
from infra.config_sections import default_shard_quota
from scripts.preflight.result import Clients, Result, error_text, iam_fix

NAME = "Kinesis shard bound"


def check_shard_bound(config: InstanceConfig, clients: Clients) -> Result:
    stated = config.stream.shard_quota
    bound = stated or default_shard_quota(config.region)
    source = "stream.shard_quota" if stated else f"the default quota of {config.region}"
    try:
        limit = int(clients["kinesis"].describe_limits().get("ShardLimit", 0))
    except Exception as exc:
        return Result(
            NAME,
            False,
            f"DescribeLimits failed: {error_text(exc)}",
            iam_fix("kinesis:DescribeLimits"),
        )
    if stated is not None and stated > limit:
        return Result(
            NAME,
            False,
            f"stream.shard_quota {stated:,} is above the account's shard quota {limit:,}",
            f"set stream.shard_quota to {limit} (or null), or request a higher Kinesis "
            "shard quota (Service Quotas) first",
        )
    if limit > bound:
        return Result(
            NAME,
            True,
            f"synth allows at most {bound:,} shards ({source}); the account's quota is {limit:,}",
            f"set stream.shard_quota to {limit} in the instance's cdk.json entry to let "
            "synth allow up to it",
            warn=True,
        )
    return Result(
        NAME,
        True,
        f"synth allows at most {bound:,} shards ({source}); the account's quota is {limit:,}",
    )
