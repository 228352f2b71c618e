"""The pure parts of ``scripts.reprocess``: selection, starts, entries, positions
(requests and responses: tests/producer/test_kinesis_put.py)."""

from __future__ import annotations

import pytest

from model.record import MALFORMED_JSON, NOT_UTF8, REASONS, WRONG_TYPE
from producer.kinesis_put import MAX_RECORD_BYTES
from scripts.reprocess import plan
from scripts.reprocess.hook import FailedRecord
from scripts.reprocess.plan import (
    Entry,
    PlanError,
    Positions,
    Selection,
    State,
    advance,
    entry_for,
    parse_from_offsets,
    parse_reasons,
    parse_time,
    start_offsets,
)


def record(
    offset: int = 0,
    *,
    partition: int = 0,
    reason: str = MALFORMED_JSON,
    data: bytes = b"{",
    ts: int | None = 1_000,
    partition_key: str | None = "pk",
) -> FailedRecord:
    headers: list[tuple[str, str]] = [("reason", reason)]
    if partition_key is not None:
        headers.append(("partition_key", partition_key))
    return FailedRecord(
        data=data,
        reason=reason,
        headers=tuple(headers),
        key=f"s/shardId-0/{partition}{offset:04d}",
        partition=partition,
        offset=offset,
        timestamp_ms=ts,
    )


# ------------------------------------------------------------------ selection


def test_selection_filters_by_reason_and_window() -> None:
    selection = Selection(frozenset({MALFORMED_JSON}), from_ms=100, to_ms=200)
    assert selection.skip_reason(record(reason=MALFORMED_JSON, ts=150)) is None
    assert "not selected" in (selection.skip_reason(record(reason=NOT_UTF8, ts=150)) or "")
    assert selection.skip_reason(record(ts=99)) == "before --from-time"
    assert selection.skip_reason(record(ts=None)) == "before --from-time"
    assert not selection.past_end(record(ts=199))
    assert selection.past_end(record(ts=200))


def test_an_empty_selection_takes_everything() -> None:
    selection = Selection()
    assert all(selection.skip_reason(record(reason=r, ts=None)) is None for r in REASONS)
    assert not selection.past_end(record(ts=10**15))


def test_parse_time_needs_an_offset() -> None:
    assert parse_time("--from-time", "1970-01-01T00:00:01Z") == 1000
    assert parse_time("--to-time", "1970-01-01T09:00:02+09:00") == 2000
    with pytest.raises(PlanError, match=r"--from-time '1970-01-01T00:00:01': no UTC offset"):
        parse_time("--from-time", "1970-01-01T00:00:01")
    with pytest.raises(PlanError, match="--to-time 'yesterday': expected ISO-8601"):
        parse_time("--to-time", "yesterday")


def test_parse_reasons_accepts_only_the_jobs_reasons() -> None:
    assert parse_reasons([MALFORMED_JSON, f"{NOT_UTF8},{WRONG_TYPE}"], REASONS) == {
        MALFORMED_JSON,
        NOT_UTF8,
        WRONG_TYPE,
    }
    assert parse_reasons([], REASONS) == frozenset()
    with pytest.raises(PlanError, match=r"--reason 'nope': not a failure reason; allowed: "):
        parse_reasons(["nope"], REASONS)


def test_parse_from_offsets() -> None:
    assert parse_from_offsets(["5"]) == {None: 5}
    assert parse_from_offsets(["0:7,2:9", "3"]) == {0: 7, 2: 9, None: 3}
    with pytest.raises(PlanError, match=r"--from-offset '-1': expected N"):
        parse_from_offsets(["-1"])
    with pytest.raises(PlanError, match="partition 1 given twice"):
        parse_from_offsets(["1:2", "1:3"])


# ------------------------------------------------------------------ starts


MARKS = {0: (0, 10), 1: (5, 20), 2: (0, 0)}


def test_starts_resume_from_the_group_or_the_earliest_offset() -> None:
    starts = start_offsets([0, 1, 2], MARKS, {0: 4, 1: None, 2: None})
    assert [(s.partition, s.offset, s.source) for s in starts] == [
        (0, 4, "committed"),
        (1, 5, "earliest (no committed position)"),
        (2, 0, "earliest (no committed position)"),
    ]
    assert all(s.warning is None for s in starts)


def test_a_committed_position_below_retention_warns_of_expired_records() -> None:
    (start,) = start_offsets([1], MARKS, {1: 2})
    assert start.offset == 5
    assert start.warning is not None
    assert "3 records expired (topic retention) before they were re-sent" in start.warning


def test_from_offset_overrides_the_group_per_partition_or_all() -> None:
    starts = start_offsets([0, 1, 2], MARKS, {0: 4, 1: 9, 2: 0}, from_offsets={None: 6, 0: 1})
    assert [(s.offset, s.source) for s in starts] == [
        (1, "--from-offset"),
        (6, "--from-offset"),
        (6, "--from-offset"),
    ]
    only_one = start_offsets([0, 1], MARKS, {0: 4, 1: 9}, from_offsets={1: 0})
    assert [(s.offset, s.source) for s in only_one] == [(4, "committed"), (5, "--from-offset")]
    assert only_one[1].warning == "partition 1: offset 0 is no longer retained; from 5"


def test_from_offset_names_a_partition_that_does_not_exist() -> None:
    with pytest.raises(
        PlanError, match=r"partition 7 does not exist; the topic has partitions 0, 1"
    ):
        start_offsets([0, 1], MARKS, {}, from_offsets={7: 0})


def test_from_time_starts_at_the_brokers_answer_or_the_end() -> None:
    starts = start_offsets([0, 1], MARKS, {0: 9, 1: 9}, time_offsets={0: 3, 1: -1})
    assert [(s.offset, s.source) for s in starts] == [
        (3, "--from-time"),
        (20, "--from-time (no record that recent)"),
    ]


# ------------------------------------------------------------------ requests


def entry(offset: int, size: int, key: str = "k") -> Entry:
    return entry_for(record(offset, partition_key=key), b"x" * size)


def test_too_large_counts_the_partition_key() -> None:
    assert plan.too_large(entry(0, MAX_RECORD_BYTES - 1, key="k")) is None
    problem = plan.too_large(entry(0, MAX_RECORD_BYTES, key="k"))
    assert problem is not None and "1,048,577 bytes with its partition key" in problem


def test_the_original_partition_key_is_kept_else_the_topic_key() -> None:
    assert entry_for(record(partition_key="order-7"), b"{}").request() == {
        "Data": b"{}",
        "PartitionKey": "order-7",
    }
    bare = record(3, partition_key=None)
    assert entry_for(bare, b"{}").partition_key == bare.key


def test_rate_delay() -> None:
    assert plan.rate_delay(100, 0, 0.0) == 0.0
    assert plan.rate_delay(100, 50, 1.5) == pytest.approx(0.5)
    assert plan.rate_delay(100, 50, 3.0) == 0.0


# ------------------------------------------------------------------ positions


def test_advance_stops_at_the_first_record_not_sent() -> None:
    assert advance(3, [(3, State.SENT), (4, State.SENT), (5, State.PENDING), (6, State.SENT)]) == 5
    assert advance(3, [(3, State.REJECTED), (4, State.SENT)]) == 3
    assert advance(3, [(3, State.SENT), (7, State.SENT)]) == 8  # a gap (compaction) is fine
    assert advance(3, []) == 3


def test_positions_move_only_once_kinesis_accepted() -> None:
    positions = Positions({0: 10, 1: 0})
    for offset in (10, 11, 12):
        positions.read(0, offset, State.PENDING)
    positions.read(1, 0, State.PENDING)
    assert positions.to_commit() == {}
    positions.settle([(0, 10), (0, 11)], State.SENT)
    assert positions.to_commit() == {0: 12}
    positions.mark_committed({0: 12})
    assert positions.to_commit() == {}
    positions.settle([(0, 12), (1, 0)], State.SENT)
    assert positions.to_commit() == {0: 13, 1: 1}


def test_a_rejected_record_holds_its_partition_for_the_rest_of_the_run() -> None:
    positions = Positions({0: 0, 1: 0})
    positions.read(0, 0, State.PENDING)
    positions.read(0, 1, State.REJECTED)
    positions.read(0, 2, State.PENDING)
    positions.read(1, 0, State.PENDING)
    positions.settle([(0, 0), (0, 2), (1, 0)], State.SENT)
    positions.read(0, 3, State.PENDING)
    positions.settle([(0, 3)], State.SENT)
    assert positions.positions() == {0: 1, 1: 1}
    assert positions.held() == {0: (1, State.REJECTED)}


@pytest.mark.parametrize("state", [State.SKIPPED, State.FAILED])
def test_skipped_and_failed_records_hold_too(state: State) -> None:
    positions = Positions({4: 7})
    positions.read(4, 7, state)
    positions.read(4, 8, State.PENDING)
    positions.settle([(4, 8)], State.SENT)
    assert positions.positions() == {4: 7}
    assert positions.to_commit() == {}
    assert positions.held() == {4: (7, state)}


def test_a_record_refused_by_kinesis_holds_after_the_ones_before_it() -> None:
    positions = Positions({0: 0})
    for offset in range(4):
        positions.read(0, offset, State.PENDING)
    positions.settle([(0, 0), (0, 1), (0, 3)], State.SENT)
    positions.settle([(0, 2)], State.FAILED)
    assert positions.positions() == {0: 2}
    assert positions.held() == {0: (2, State.FAILED)}
