"""scripts.reprocess.run: one reprocess run over fakes: what is sent, what is committed
and when, what is reported; and the fix-up hook it applies (scripts.reprocess.hook)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import pytest

from model.record import MALFORMED_JSON, NOT_UTF8, WRONG_TYPE
from producer.kinesis_put import KinesisCallError, PutOutcome, Stored
from scripts.reprocess.hook import (
    FailedRecord,
    Fix,
    HookError,
    Reject,
    apply_fix,
    identity,
    load_hook,
)
from scripts.reprocess.plan import Entry, Positions, Selection, State
from scripts.reprocess.run import Report, print_report, reprocess
from tests.fixtures import EXAMPLE_CDK_JSON

CDK_JSON = EXAMPLE_CDK_JSON


def failure(
    partition: int, offset: int, reason: str = MALFORMED_JSON, data: bytes = b"{"
) -> FailedRecord:
    return FailedRecord(
        data=data,
        reason=reason,
        headers=(("reason", reason), ("partition_key", f"pk-{partition}-{offset}")),
        key=f"stream/shardId-0/{partition}{offset:03d}",
        partition=partition,
        offset=offset,
        timestamp_ms=1_000,
    )


def topic(per_partition: int = 3, partitions: int = 2) -> list[FailedRecord]:
    """Interleaved as a consumer delivers them: offset order within a partition."""
    return [failure(p, o) for o in range(per_partition) for p in range(partitions)]


class Kinesis:
    """Accepts every entry except those whose offsets are in ``refuse``;
    raises on call ``crash_on`` (1-based). Logs sends and commits in order."""

    def __init__(
        self, refuse: set[tuple[int, int]] | None = None, crash_on: int | None = None
    ) -> None:
        self.refuse = refuse or set()
        self.crash_on = crash_on
        self.log: list[tuple[str, object]] = []
        self.stored: list[tuple[int, int, bytes]] = []

    def send(self, batch: list[Entry]) -> PutOutcome[FailedRecord]:
        if (
            self.crash_on is not None
            and len([e for e in self.log if e[0] == "send"]) + 1 == self.crash_on
        ):
            raise KinesisCallError("PutRecords on stream s failed (AccessDeniedException): no")
        self.log.append(("send", [(e.source.partition, e.source.offset) for e in batch]))
        outcome: PutOutcome[FailedRecord] = PutOutcome(calls=1)
        for e in batch:
            where = (e.source.partition, e.source.offset)
            if where in self.refuse:
                outcome.failed.append(e)
                outcome.last_error = "ProvisionedThroughputExceededException: Rate exceeded"
            else:
                outcome.stored.append(Stored(e, "shardId-0", str(e.source.offset)))
                self.stored.append((*where, e.data))
        return outcome

    def commit(self, offsets: dict[int, int]) -> None:
        self.log.append(("commit", dict(offsets)))


def run(
    records: Sequence[FailedRecord],
    kinesis: Kinesis,
    *,
    fix: Fix = identity,
    selection: Selection | None = None,
    starts: dict[int, int] | None = None,
    batch_records: int = 2,
) -> tuple[Report, str]:
    out = io.StringIO()
    report = reprocess(
        records,
        Positions(starts or {0: 0, 1: 0}),
        selection=selection or Selection(),
        fix=fix,
        send=kinesis.send,
        commit=kinesis.commit,
        dry_run=False,
        batch_records=batch_records,
        out=out,
    )
    return report, out.getvalue()


def test_every_record_is_sent_once_and_each_commit_follows_its_send() -> None:
    kinesis = Kinesis()
    report, output = run(topic(), kinesis)
    assert sorted((p, o) for p, o, _ in kinesis.stored) == [
        (p, o) for p in (0, 1) for o in range(3)
    ]
    assert [kind for kind, _ in kinesis.log] == ["send", "commit"] * 3
    # Each commit covers exactly what the sends before it stored, nothing more.
    sent: set[tuple[int, int]] = set()
    for kind, value in kinesis.log:
        if kind == "send":
            sent.update(value)  # type: ignore[arg-type]
        else:
            for partition, position in value.items():  # type: ignore[attr-defined]
                assert {(partition, o) for o in range(position)} <= sent
    assert report.committed == {0: 3, 1: 3}
    assert (report.read, report.re_sent, len(report.rejected), len(report.failed)) == (6, 6, 0, 0)
    assert report.ok
    assert "progress: read=" in output
    assert report.figures_line() == "figures: read=6 skipped=0 re-sent=6 rejected=0 failed=0"


def test_a_run_that_dies_mid_way_resumes_without_losing_anything() -> None:
    records = topic(per_partition=5)
    first = Kinesis(crash_on=3)
    report, _ = run(records, first)
    assert report.stopped is not None and "AccessDeniedException" in report.stopped
    assert not report.ok
    committed = {0: 0, 1: 0} | report.committed
    assert committed == {0: 2, 1: 2}, "only what the two accepted requests held"
    # The next run starts at the committed positions (the group's offsets).
    rest = [r for r in records if r.offset >= committed[r.partition]]
    second = Kinesis()
    again, _ = run(rest, second, starts=committed)
    assert again.ok and again.committed == {0: 5, 1: 5}
    landed = {(p, o) for p, o, _ in first.stored + second.stored}
    assert landed == {(r.partition, r.offset) for r in records}


def test_refused_by_kinesis_after_retries_fails_and_holds_the_position() -> None:
    kinesis = Kinesis(refuse={(1, 1)})
    report, output = run(topic(per_partition=4), kinesis)
    assert [(r.partition, r.offset) for r, _ in report.failed] == [(1, 1)]
    assert "Rate exceeded" in report.failed[0][1]
    assert report.stopped is not None and "stopped reading" in report.stopped
    assert report.held == {1: (1, State.FAILED)}
    assert report.committed[1] == 1, "never past the refused record"
    assert not report.ok
    assert "failed      " in output


def repair(record: FailedRecord) -> bytes | None:
    if record.reason == NOT_UTF8:
        raise Reject("cannot guess the text")
    if record.reason == WRONG_TYPE:
        return None
    return b'{"fixed":"' + record.key.encode() + b'"}'


def test_the_hook_repairs_and_rejected_records_are_reported_and_hold() -> None:
    records = [
        failure(0, 0),
        failure(0, 1, NOT_UTF8),
        failure(0, 2),
        failure(1, 0, WRONG_TYPE),
        failure(1, 1),
    ]
    kinesis = Kinesis()
    report, output = run(records, kinesis, fix=repair)
    assert [data for _, _, data in kinesis.stored] == [
        b'{"fixed":"stream/shardId-0/0000"}',
        b'{"fixed":"stream/shardId-0/0002"}',
        b'{"fixed":"stream/shardId-0/1001"}',
    ]
    assert [(r.coordinates, why) for r, why in report.rejected] == [
        ("0:1", "cannot guess the text"),
        ("1:0", "the hook returned None"),
    ]
    assert report.held == {0: (1, State.REJECTED), 1: (0, State.REJECTED)}
    assert report.committed == {0: 1}, "partition 1 never moves: its first record was rejected"
    assert report.ok, "a rejection is a decision, not a failure"
    out = io.StringIO()
    print_report(report, out)
    assert "held              partition 0 at offset 1 (rejected)" in out.getvalue()
    assert "rejected 1:0 key stream/shardId-0/1000: the hook returned None" in out.getvalue()
    assert "rejected    " in output


def test_records_filtered_out_are_counted_and_hold_the_position() -> None:
    records = [failure(0, 0, NOT_UTF8), failure(0, 1), failure(1, 0), failure(1, 1, NOT_UTF8)]
    kinesis = Kinesis()
    report, _ = run(records, kinesis, selection=Selection(frozenset({MALFORMED_JSON})))
    assert sorted((p, o) for p, o, _ in kinesis.stored) == [(0, 1), (1, 0)]
    assert report.skipped == 2
    assert report.committed == {1: 1}
    assert report.held == {0: (0, State.SKIPPED), 1: (1, State.SKIPPED)}


def test_a_fix_too_large_for_kinesis_fails_without_a_call() -> None:
    def inflate(record: FailedRecord) -> bytes:
        return b"x" * (1024 * 1024 + 1) if record.offset == 1 else record.data

    kinesis = Kinesis()
    report, _ = run([failure(0, 0), failure(0, 1), failure(0, 2)], kinesis, fix=inflate)
    assert [(p, o) for p, o, _ in kinesis.stored] == [(0, 0), (0, 2)]
    assert [r.offset for r, _ in report.failed] == [1]
    assert "a Kinesis record may have 1,048,576" in report.failed[0][1]
    assert report.committed == {0: 1}
    assert not report.ok


def test_a_hook_that_crashes_stops_the_run_naming_the_record() -> None:
    def broken(record: FailedRecord) -> bytes:
        if record.offset == 2:
            raise KeyError("id")
        return record.data

    kinesis = Kinesis()
    report, _ = run(topic(per_partition=4), kinesis, fix=broken, batch_records=1)
    assert report.stopped is not None
    assert "fix hook raised KeyError on record 0:2" in report.stopped
    assert report.committed == {0: 2, 1: 2}
    assert sorted((p, o) for p, o, _ in kinesis.stored) == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_dry_run_prints_each_record_and_touches_nothing() -> None:
    def no_send(_: list[Entry]) -> PutOutcome[FailedRecord]:
        raise AssertionError("a dry run sent")

    def no_commit(_: dict[int, int]) -> None:
        raise AssertionError("a dry run committed")

    records = [failure(0, 0), failure(0, 1, NOT_UTF8), failure(1, 0, data=b"x" * 300)]
    out = io.StringIO()
    report = reprocess(
        records,
        Positions({0: 0, 1: 0}),
        selection=Selection(frozenset({MALFORMED_JSON})),
        fix=identity,
        send=no_send,
        commit=no_commit,
        dry_run=True,
        out=out,
    )
    lines = out.getvalue().splitlines()
    assert lines == [
        "would send        0:0  stream/shardId-0/0000  malformed_json  1 B -> 7 B",
        "skip              0:1  stream/shardId-0/0001  not_utf8  1 B"
        "  (reason not_utf8 not selected)",
        "would send        1:0  stream/shardId-0/1000  malformed_json  300 B -> 306 B",
    ]
    assert (report.read, report.would_send, report.skipped, report.re_sent) == (3, 2, 1, 0)
    assert report.committed == {}
    assert report.figures_line() == "figures: read=3 skipped=1 would-send=2 rejected=0 failed=0"


# ------------------------------------------------------------------ the hook


def upper(record: FailedRecord) -> bytes:
    return record.data.upper()


def test_load_hook_finds_a_callable_by_module_and_name() -> None:
    hook = load_hook("tests.scripts.reprocess.test_run:upper")
    assert apply_fix(hook, failure(0, 0, data=b"abc")).data == b"ABC"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "expected module:callable"),
        ("nowhere_module_x:fix", "cannot import 'nowhere_module_x'"),
        ("tests.scripts.reprocess.test_run:missing", "has no attribute 'missing'"),
        ("tests.scripts.reprocess.test_run:CDK_JSON", "is not callable"),
    ],
)
def test_load_hook_explains_a_bad_spec(spec: str, message: str) -> None:
    with pytest.raises(HookError, match=message):
        load_hook(spec)


def test_a_hook_returning_something_else_than_bytes_is_a_bug() -> None:
    with pytest.raises(HookError, match="returned str for record 0:0"):
        apply_fix(lambda r: "text", failure(0, 0))  # type: ignore[arg-type,return-value]
