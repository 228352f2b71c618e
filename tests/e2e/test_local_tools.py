"""The local run's own tools: event mix and producer (the topic reader and the
summary: tests/local/test_failures.py, tests/local/test_summary.py).

Fast (no Spark): these run in every ``pytest`` and guard the figures the
end-to-end cases assert on; a producer that miscounts would make every e2e
verdict meaningless.
"""

from __future__ import annotations

import json
import re
import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from local.emulators import LOOPBACK, Endpoints, start_moto
from model.kpl import deaggregate
from model.record import BAD_AGGREGATE, MALFORMED_JSON, NOT_UTF8, REASONS, TOO_LARGE
from producer import events, producer
from producer.kinesis_put import chunks

START = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def test_mix_has_exact_counts_and_every_failure_kind() -> None:
    spec = events.MixSpec(
        count=1000,
        malformed_share=0.03,
        duplicate_share=0.05,
        failure_kinds=events.FAILURE_KINDS,
        too_large_bytes=64,
    )
    records = events.generate(spec, START)
    kinds = [r.kind for r in records]
    assert len(records) == 1000
    assert kinds.count(events.DUPLICATE) == 50
    assert sum(r.is_failure for r in records) == 30
    assert {k for k in kinds if k not in (events.VALID, events.DUPLICATE)} == set(
        events.FAILURE_KINDS
    )
    assert len(events.expected_ids(records)) == 1000 - 50 - 30


def test_mix_is_seeded_and_duplicates_resend_an_earlier_event() -> None:
    spec = events.MixSpec(count=500, duplicate_share=0.2, seed=3)
    first, again = events.generate(spec, START), events.generate(spec, START)
    assert first == again
    assert first != events.generate(events.MixSpec(count=500, duplicate_share=0.2, seed=4), START)
    seen: dict[str, bytes] = {}
    for record in first:
        if record.kind == events.VALID:
            assert record.event_id not in seen
            seen[record.event_id or ""] = record.data
        elif record.kind == events.DUPLICATE:
            assert seen[record.event_id or ""] == record.data
            assert record.partition_key == record.event_id


def test_valid_events_carry_nanoseconds_and_offsets() -> None:
    records = events.generate(events.MixSpec(count=200, malformed_share=0, seed=1), START)
    stamps = [json.loads(r.data)["occurredAt"] for r in records if r.kind == events.VALID]
    pattern = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}(Z|[+-]\d\d:\d\d)$")
    assert all(pattern.match(s) for s in stamps)
    assert {s[-6:] for s in stamps if not s.endswith("Z")} == {"+00:00", "+09:00", "-05:30"}


@pytest.mark.parametrize("offset", ["Z", "+09:00", "-05:30"])
def test_format_timestamp_keeps_the_instant(offset: str) -> None:
    instant = datetime(2026, 1, 2, 23, 59, 59, tzinfo=UTC)
    text = events.format_timestamp(instant, 123_456_789, offset)
    parsed = datetime.fromisoformat(text.replace("123456789", "123456").replace("Z", "+00:00"))
    assert parsed == instant + timedelta(microseconds=123_456)


def test_the_producer_can_make_every_reason_the_job_assigns() -> None:
    assert sorted(events.FAILURE_KINDS) == sorted(REASONS)


def test_mix_rejects_bad_shares_and_kinds() -> None:
    with pytest.raises(ValueError, match="malformed_share"):
        events.MixSpec(count=10, malformed_share=1.5)
    with pytest.raises(ValueError, match="failure_kinds"):
        events.MixSpec(count=10, failure_kinds=("nope",))
    with pytest.raises(ValueError, match="too_large_bytes"):
        events.MixSpec(count=10, failure_kinds=(TOO_LARGE,))


def test_too_large_record_has_the_requested_size() -> None:
    record = events.malformed_record(TOO_LARGE, "k", too_large_bytes=5000)
    assert len(record.data) == 5000
    assert json.loads(record.data)["id"] == "k"


def test_chunks_respect_record_and_byte_limits() -> None:
    small = producer.plan_entries([events.SampleRecord("valid", b"x", "k")] * 1201)
    assert [len(c) for c in chunks(small)] == [500, 500, 201]
    big = producer.plan_entries([events.SampleRecord("valid", b"x" * 1_000_000, "k")] * 12)
    assert [len(c) for c in chunks(big)] == [5, 5, 2]


def _sample(kind: str, n: int) -> events.SampleRecord:
    return events.SampleRecord(kind, f"{kind}-{n}".encode(), f"pk-{n}")


def test_plan_entries_packs_groups_and_keeps_bad_aggregates_alone() -> None:
    valid = [_sample("valid", n) for n in range(7)]
    records = [
        *valid[:3],
        _sample(MALFORMED_JSON, 3),
        _sample(NOT_UTF8, 4),  # a second failure, in the next group
        valid[3],
        events.malformed_record(BAD_AGGREGATE, "bad"),  # alone, never packed
        *valid[4:],
    ]
    entries = producer.plan_entries(records, aggregate_size=4, share=1.0)
    assert [(len(e.source.members), e.source.aggregated) for e in entries] == [
        (4, True),
        (2, True),
        (1, False),
        (3, True),
    ]
    assert [m for e in entries for m in e.source.members] == records, "order and every record kept"
    first = entries[0]
    assert first.partition_key == "pk-0"
    users = deaggregate(first.data)
    assert [u.data for u in users] == [r.data for r in records[:4]]
    assert {u.partition_key for u in users} == {"pk-0"}, "one key per aggregate: one shard"
    assert entries[2].data == records[6].data


def test_plan_entries_share_alternates_groups_and_zero_is_off() -> None:
    records = [_sample("valid", n) for n in range(12)]
    half = producer.plan_entries(records, aggregate_size=3, share=0.5)
    assert [(len(e.source.members), e.source.aggregated) for e in half] == [(1, False)] * 3 + [
        (3, True)
    ] + [(1, False)] * 3 + [(3, True)]
    off = producer.plan_entries(records)
    assert [(len(e.source.members), e.source.aggregated) for e in off] == [(1, False)] * 12
    with pytest.raises(ValueError, match="aggregate_share"):
        producer.plan_entries(records, aggregate_size=3, share=1.5)


def test_put_all_aggregated_counts_user_records_and_aggregates() -> None:
    records = events.generate(
        events.MixSpec(count=200, malformed_share=0.1, failure_kinds=events.DEFAULT_FAILURE_KINDS),
        START,
    )
    client = FlakyKinesis(rejections=2)
    report = producer.put_all(
        client, "s", records, sleep=lambda _s: None, aggregate_size=10, aggregate_share=0.5
    )
    assert len(report.placed) == 200, "user records, not Kinesis records"
    assert 0 < report.aggregates < report.kinesis_records < 200
    packed = [p for p in report.placed if p.sub_sequence_number is not None]
    assert len(packed) == 200 - (report.kinesis_records - report.aggregates)
    # Coordinates of user records: the aggregate's sequence number and their index.
    coordinates = {(p.sequence_number, p.sub_sequence_number) for p in report.placed}
    assert len(coordinates) == 200
    assert len(report.expected_failures()) == 20, "one failure key per failure record"
    summary = report.to_dict(full=False)
    assert (summary["records"], summary["aggregates"]) == (200, report.aggregates)


class FlakyKinesis:
    """Rejects the first ``rejections`` entries of each call, like throttling."""

    def __init__(self, rejections: int, forever: bool = False) -> None:
        self.rejections = rejections
        self.forever = forever
        self.calls = 0
        self.sequence = 0

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.calls += 1
        out: list[dict[str, Any]] = []
        for i, _ in enumerate(Records):
            if i < self.rejections and (self.forever or self.calls == 1):
                out.append({"ErrorCode": "ProvisionedThroughputExceededException"})
            else:
                self.sequence += 1
                out.append({"ShardId": "shardId-0", "SequenceNumber": str(self.sequence)})
        return {"Records": out, "FailedRecordCount": sum("ErrorCode" in r for r in out)}


def test_put_all_resends_rejected_entries_with_backoff() -> None:
    records = events.generate(events.MixSpec(count=20, malformed_share=0.1), START)
    client = FlakyKinesis(rejections=3)
    sleeps: list[float] = []
    report = producer.put_all(client, "s", records, sleep=sleeps.append)
    assert len(report.placed) == 20
    assert report.retried_entries == 3
    assert sleeps == [0.1]
    assert sorted(p.record.data for p in report.placed) == sorted(r.data for r in records)
    assert len(report.expected_failures()) == 2
    assert all(k.startswith("s/shardId-0/") for k in report.expected_failures())


def test_put_all_gives_up_after_bounded_attempts() -> None:
    records = events.generate(events.MixSpec(count=5, malformed_share=0), START)
    sleeps: list[float] = []
    with pytest.raises(producer.ProduceError, match="after 4 attempts"):
        producer.put_all(
            FlakyKinesis(1, forever=True), "s", records, max_attempts=4, sleep=sleeps.append
        )
    assert sleeps == [0.1, 0.2, 0.4]


def test_producer_cli_against_moto(endpoints: Endpoints, tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    code = producer.main(
        [
            "--stream", "producer-cli", "--region", "us-east-1",
            "--endpoint-url", endpoints.aws_url, "--create", "--shards", "2",
            "--count", "1000", "--report", str(report_path),
        ]
    )  # fmt: skip
    assert code == 0
    report = json.loads(report_path.read_text())
    assert report["records"] == 1000
    assert report["counts"]["duplicate"] == 50
    assert len(report["ids"]) == report["unique_valid_ids"] == 930
    assert len(report["failures"]) == 20
    assert set(report["last_sequence_by_shard"]) == {
        "shardId-000000000000",
        "shardId-000000000001",
    }


def test_a_server_that_exits_before_it_serves_fails_at_once() -> None:
    """A child server that dies (here: its port is taken) is an error naming
    it, not a wait for the whole start timeout (local/emulators.py)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((LOOPBACK, 0))
        held.listen()  # connections queue but nobody answers HTTP
        with pytest.raises(RuntimeError, match="moto exited with status 1 before it served"):
            start_moto(int(held.getsockname()[1]))
