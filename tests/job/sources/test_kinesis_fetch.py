"""``job.sources.kinesis_fetch``: retries with bounded full jitter, and a shard
read that survives throttling and expired iterators (FakeKinesis, no Spark)."""

from __future__ import annotations

from typing import Any

import pytest

from job.sources.kinesis_fetch import Backoff, ShardReader, call_with_backoff
from model.kinesis_offsets import ShardState
from tests.job.source_helpers import FakeKinesis, client_error
from tests.job.sources.test_kinesis_python import _options


def test_backoff_retries_throttling_with_bounded_full_jitter() -> None:
    sleeps: list[float] = []
    outcomes: list[Any] = [
        client_error("ProvisionedThroughputExceededException"),
        client_error("LimitExceededException"),
        client_error("ProvisionedThroughputExceededException"),
        "ok",
    ]

    def call() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return str(outcome)

    result = call_with_backoff(call, Backoff(5, 100, 250), sleeps.append, lambda: 1.0)
    assert result == "ok"
    assert sleeps == [0.1, 0.2, 0.25]  # doubled, then capped at the maximum


def test_backoff_gives_up_after_the_retry_budget_and_skips_other_errors() -> None:
    calls = []

    def throttled() -> None:
        calls.append(1)
        raise client_error("ProvisionedThroughputExceededException")

    with pytest.raises(Exception, match="ProvisionedThroughputExceeded"):
        call_with_backoff(throttled, Backoff(2, 1, 1), lambda _s: None, lambda: 0.5)
    assert len(calls) == 3

    sleeps: list[float] = []

    def denied() -> None:
        raise client_error("AccessDeniedException")

    with pytest.raises(Exception, match="AccessDenied"):
        call_with_backoff(denied, Backoff(5, 1, 1), sleeps.append, lambda: 0.5)
    assert sleeps == []


def test_read_survives_throttling_and_expired_iterators_without_loss_or_repeat() -> None:
    fake = FakeKinesis(shards=1, page_size=10)
    fake.put("shardId-000000000000", *[f"r{i}" for i in range(35)])
    sleeps: list[float] = []
    reader = ShardReader(fake, _options(), sleep=sleeps.append)
    end = fake.shards["shardId-000000000000"]["records"][-1]["SequenceNumber"]
    fake.failures = [client_error("ProvisionedThroughputExceededException")]
    seen = []
    for record in reader.read_range("shardId-000000000000", ShardState(), end):
        seen.append(record["PartitionKey"])
        if len(seen) in (10, 25):  # iterators age out between pages
            fake.expire_iterators()
    assert seen == [f"r{i}" for i in range(35)]
    assert len(sleeps) == 1  # the throttled call (the first GetShardIterator)
    assert fake.calls["get_shard_iterator"] == 4  # throttled, first, one per expiry
