"""job.sources.kinesis_subscription's pure parts: where a subscription starts,
and what one SubscribeToShard event says."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from job.sources.kinesis_subscription import event_view, starting_position
from model.kinesis_offsets import ShardState
from tests.job.source_helpers import efo_event as event


def test_starting_position_follows_the_shard_state() -> None:
    assert starting_position(ShardState(after="42")) == {
        "Type": "AFTER_SEQUENCE_NUMBER",
        "SequenceNumber": "42",
    }
    assert starting_position(ShardState(ts=1_700_000_000.5)) == {
        "Type": "AT_TIMESTAMP",
        "Timestamp": datetime.fromtimestamp(1_700_000_000.5, UTC),
    }
    assert starting_position(ShardState()) == {"Type": "TRIM_HORIZON"}


def test_event_view_reads_caught_up_and_the_shard_end() -> None:
    behind = event_view(event([1, 2], behind=500))
    assert [r["SequenceNumber"] for r in behind.records] == ["1", "2"]
    assert (behind.caught_up, behind.ended, behind.continuation) == (False, False, "2")
    tip = event_view(event([], cont="7"))
    assert (tip.records, tip.caught_up, tip.ended) == ([], True, False)
    end = event_view(event([3], children=True))
    assert end.ended and end.continuation is None


def test_event_view_names_an_unexpected_event() -> None:
    with pytest.raises(ValueError, match="unexpected event"):
        event_view({"Other": {}})
