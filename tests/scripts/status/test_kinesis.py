"""scripts.status.kinesis: the lag per shard, pure (scans folded from responses)
and against in-process moto."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scripts.status.checkpoint import AFTER, TRIM_HORIZON, Position
from scripts.status.kinesis import (
    Budget,
    Scan,
    Shard,
    add_response,
    estimate_records,
    lag_of,
    list_shards,
    position_for,
    shard_status,
)
from scripts.status.report import lag_records
from tests.scripts.local_runs import NOW, SHARD0, SHARD1, STREAM, make_stream, put

# ------------------------------------------------------------------ lag (pure)


def record(seq: int, at: datetime) -> dict[str, Any]:
    return {"SequenceNumber": str(seq), "ApproximateArrivalTimestamp": at}


def test_responses_fold_into_a_scan() -> None:
    t0 = NOW - timedelta(seconds=10)
    first = add_response(Scan(), {"Records": [record(5, t0)], "MillisBehindLatest": 9000})
    both = add_response(
        first,
        {"Records": [record(6, t0 + timedelta(seconds=1))], "MillisBehindLatest": 0},
    )
    assert (first.records, first.reached_tip, first.last_behind_ms) == (1, False, 9000)
    assert both == Scan(
        records=2,
        reached_tip=True,
        last_sequence="6",
        first_arrival=t0,
        last_arrival=t0 + timedelta(seconds=1),
        last_behind_ms=0,
        calls=2,
    )
    lag = lag_of(both, NOW)
    # The tip arrived 1 s after the oldest unread record, which waited 10 s.
    assert (lag.records, lag.exact, lag.estimate, lag.behind_ms) == (2, True, None, 1000)
    assert lag.oldest_unread_age_ms == 10_000


def test_an_unfinished_scan_extrapolates_the_arrival_rate() -> None:
    t0 = NOW - timedelta(minutes=5)
    # 101 records over 10 s (10 per second), and 60 s of stream still unread.
    found = Scan(
        records=101,
        first_arrival=t0,
        last_arrival=t0 + timedelta(seconds=10),
        last_behind_ms=60_000,
        calls=1,
    )
    assert estimate_records(found) == 101 + 600
    lag = lag_of(found, NOW)
    assert not lag.exact and lag.records == 101 and lag.estimate == 701
    assert lag.behind_ms == 70_000  # 10 s read + 60 s still behind
    assert lag_records(lag) == ">=101 (~701 est.)"
    # All read records arrived at once: no rate, only the lower bound.
    same_time = Scan(records=5, first_arrival=t0, last_arrival=t0, last_behind_ms=1000)
    assert estimate_records(same_time) is None
    assert lag_records(lag_of(same_time, NOW)) == ">=5 (no rate to estimate)"


def test_a_shard_the_offset_does_not_list_starts_at_trim_horizon() -> None:
    committed = {SHARD0: Position(AFTER, sequence="3")}
    assert position_for(Shard(SHARD0), committed, "TRIM_HORIZON") == committed[SHARD0]
    assert position_for(Shard(SHARD1), committed, "LATEST") == Position(TRIM_HORIZON)
    assert position_for(Shard(SHARD1), None, "LATEST") == Position("LATEST")


def test_budget_must_allow_a_call() -> None:
    with pytest.raises(ValueError, match="max_calls=0"):
        Budget(max_calls=0)


# ------------------------------------------------------------------ Kinesis (moto)


def test_lag_is_the_records_after_the_committed_position(aws: None) -> None:
    kinesis = make_stream()
    seqs0 = put(kinesis, SHARD0, 7)
    seqs1 = put(kinesis, SHARD1, 3)
    shards = list_shards(kinesis, STREAM)
    assert [s.shard_id for s in shards] == [SHARD0, SHARD1] and not shards[0].closed
    budget = Budget()
    behind = shard_status(
        kinesis, STREAM, shards[0], Position(AFTER, sequence=seqs0[3]), budget,
        tip_window_sec=60, now=lambda: datetime.now(UTC),
    )  # fmt: skip
    caught_up = shard_status(
        kinesis, STREAM, shards[1], Position(AFTER, sequence=seqs1[-1]), budget,
        tip_window_sec=60, now=lambda: datetime.now(UTC),
    )  # fmt: skip
    assert behind.tip == seqs0[-1] and behind.lag.records == 3 and behind.lag.exact
    assert behind.lag.oldest_unread_age_ms >= 0
    assert caught_up.tip == seqs1[-1] and caught_up.lag.records == 0 and caught_up.lag.exact
    assert caught_up.lag.oldest_unread_age_ms == 0


def test_a_backlog_beyond_the_scan_is_a_lower_bound_and_the_tip_is_read_near_now(
    aws: None,
) -> None:
    kinesis = make_stream(shards=1)
    seqs = put(kinesis, SHARD0, 25)
    (shard,) = list_shards(kinesis, STREAM)
    found = shard_status(
        kinesis, STREAM, shard, Position(TRIM_HORIZON), Budget(max_calls=2, max_records=10),
        tip_window_sec=60, now=lambda: datetime.now(UTC),
    )  # fmt: skip
    assert not found.lag.exact and found.lag.records == 10
    assert found.tip == seqs[-1] and found.tip_note == "read near the tip"


def test_an_empty_shard_has_no_tip_and_no_lag(aws: None) -> None:
    kinesis = make_stream(shards=1)
    (shard,) = list_shards(kinesis, STREAM)
    found = shard_status(
        kinesis, STREAM, shard, Position(TRIM_HORIZON), Budget(),
        tip_window_sec=60, now=lambda: datetime.now(UTC),
    )  # fmt: skip
    assert found.tip is None and found.lag.records == 0 and found.lag.exact
