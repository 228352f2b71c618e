"""One reprocess run: what it does with each failure record it reads and each
PutRecords request's outcome (:func:`reprocess`), and the figures it reports.

The command (:mod:`scripts.reprocess.__main__`) parses the flags, opens the
topic and the stream, and hands this module the records, a sender and a
committer; nothing here reads ``cdk.json`` or talks to AWS, so the tests drive a
run with fakes. A partition's position is committed only past records Kinesis
accepted, never past a record that was not re-sent (the command's docstring).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import TextIO

from producer.kinesis_put import (
    MAX_RECORDS_PER_CALL,
    KinesisCallError,
    PutLimitError,
    PutOutcome,
    UnreadableResponseError,
    chunks,
)
from scripts.reprocess.claim_check import ClaimCheckError, Resolve, unchanged
from scripts.reprocess.hook import FailedRecord, Fix, HookError, Refused, apply_fix
from scripts.reprocess.kafka import KafkaReadError
from scripts.reprocess.plan import (
    Entry,
    PlanError,
    Positions,
    Selection,
    State,
    entry_for,
    format_offsets,
    rate_delay,
    too_large,
)


@dataclass
class Report:
    """The figures of one run and every record an operator must look at."""

    dry_run: bool
    read: int = 0
    skipped: int = 0
    re_sent: int = 0
    would_send: int = 0
    rejected: list[tuple[FailedRecord, str]] = field(default_factory=list)
    failed: list[tuple[FailedRecord, str]] = field(default_factory=list)
    calls: int = 0
    retried_entries: int = 0
    committed: dict[int, int] = field(default_factory=dict)
    held: dict[int, tuple[int, State]] = field(default_factory=dict)
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        return not self.failed and self.stopped is None

    def figures_line(self) -> str:
        sent = f"would-send={self.would_send}" if self.dry_run else f"re-sent={self.re_sent}"
        return (
            f"figures: read={self.read} skipped={self.skipped} {sent} "
            f"rejected={len(self.rejected)} failed={len(self.failed)}"
        )


Send = Callable[[list[Entry]], PutOutcome[FailedRecord]]
Commit = Callable[[dict[int, int]], None]


def _describe(record: FailedRecord) -> str:
    return f"{record.coordinates:>9}  {record.key}  {record.reason or '-'}  {len(record.data):,} B"


@dataclass
class _Run:
    """What one run does with each record it reads and each request's outcome;
    :func:`reprocess` drives it."""

    report: Report
    positions: Positions
    selection: Selection
    fix: Fix
    resolve: Resolve
    commit: Commit
    out: TextIO

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)

    def _settle_read(self, record: FailedRecord, state: State) -> None:
        self.positions.read(record.partition, record.offset, state)

    def prepare(self, record: FailedRecord) -> Entry | None:
        """The entry to send for a record read, or None (skipped, refused, too
        large, or a dry run), each outcome recorded and said."""
        report, dry_run = self.report, self.report.dry_run
        skip = self.selection.skip_reason(record)
        if skip is not None:
            self._settle_read(record, State.SKIPPED)
            report.skipped += 1
            if dry_run:
                self.say(f"skip        {_describe(record)}  ({skip})")
            return None
        try:
            record = self.resolve(record)
        except ClaimCheckError as exc:
            self._settle_read(record, State.FAILED)
            report.failed.append((record, str(exc)))
            self.say(f"claim-check {_describe(record)}  ({exc})")
            return None
        result = apply_fix(self.fix, record)
        if isinstance(result, Refused):
            self._settle_read(record, State.REJECTED)
            report.rejected.append((record, result.why))
            self.say(f"rejected    {_describe(record)}  ({result.why})")
            return None
        entry = entry_for(record, result.data)
        problem = too_large(entry)
        if problem is not None:
            self._settle_read(record, State.FAILED)
            report.failed.append((record, problem))
            self.say(f"too large   {_describe(record)}  ({problem})")
            return None
        self._settle_read(record, State.PENDING)
        if dry_run:
            report.would_send += 1
            self.say(f"would send  {_describe(record)} -> {entry.size:,} B")
            return None
        return entry

    def settle(self, outcome: PutOutcome[FailedRecord]) -> bool:
        """Record what Kinesis did with one request and commit the positions
        that moved; False when the run must stop (entries still refused)."""
        report, positions = self.report, self.positions
        report.calls += outcome.calls
        report.retried_entries += outcome.retried_entries
        positions.settle(
            ((e.source.partition, e.source.offset) for e in outcome.accepted), State.SENT
        )
        positions.settle(
            ((e.source.partition, e.source.offset) for e in outcome.failed), State.FAILED
        )
        report.re_sent += len(outcome.accepted)
        for entry in outcome.failed:
            report.failed.append((entry.source, outcome.last_error))
            self.say(f"failed      {_describe(entry.source)}  ({outcome.last_error})")
        moved = positions.to_commit()
        self.commit(moved)
        positions.mark_committed(moved)
        report.committed.update(moved)
        self.say(
            f"progress: read={report.read} re-sent={report.re_sent} "
            f"rejected={len(report.rejected)} failed={len(report.failed)} "
            f"committed={format_offsets(moved)}"
        )
        if outcome.failed:
            report.stopped = (
                f"Kinesis refused {len(outcome.failed)} records after {outcome.calls} "
                f"attempts (last error: {outcome.last_error}); stopped reading"
            )
            return False
        return True


def reprocess(
    records: Iterable[FailedRecord],
    positions: Positions,
    *,
    selection: Selection,
    fix: Fix,
    send: Send,
    commit: Commit,
    dry_run: bool,
    batch_records: int = MAX_RECORDS_PER_CALL,
    rate: float = 0.0,
    out: TextIO = sys.stdout,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    resolve: Resolve = unchanged,
) -> Report:
    """Select, read back claim-checked originals (``resolve``), fix, batch,
    send, commit. ``dry_run`` calls neither ``send`` nor ``commit``. Errors
    that end the run early end up in ``Report.stopped`` (positions committed
    before stay committed: they cover accepted records only)."""
    report = Report(dry_run=dry_run)
    run = _Run(report, positions, selection, fix, resolve, commit, out)

    def to_send() -> Generator[Entry, None, None]:
        for record in records:
            report.read += 1
            entry = run.prepare(record)
            if entry is not None:
                yield entry

    started = clock()
    pending = to_send()
    try:
        for batch in chunks(pending, max_records=batch_records):
            delay = rate_delay(report.re_sent, rate, clock() - started)
            if delay > 0:
                sleep(delay)
            if not run.settle(send(batch)):
                break
    except (
        HookError,
        KinesisCallError,
        KafkaReadError,
        PlanError,
        PutLimitError,
        UnreadableResponseError,
    ) as exc:
        report.stopped = str(exc)
    finally:
        pending.close()
    report.held = positions.held()
    return report


def print_report(report: Report, out: TextIO) -> None:
    sent_label = "would re-send" if report.dry_run else "re-sent"
    sent = report.would_send if report.dry_run else report.re_sent
    lines = [
        f"  records read      {report.read:8,}",
        f"  skipped (filters) {report.skipped:8,}",
        f"  {sent_label:<17} {sent:8,}"
        + (
            ""
            if report.dry_run
            else f"  (PutRecords calls {report.calls}, entries retried {report.retried_entries})"
        ),
        f"  rejected          {len(report.rejected):8,}",
        f"  failed            {len(report.failed):8,}",
    ]
    if not report.dry_run:
        lines.append(f"  committed         {format_offsets(report.committed)}")
    for partition, (offset, state) in report.held.items():
        lines.append(
            f"  held              partition {partition} at offset {offset} ({state.value}): "
            f"the next run re-reads from {partition}:{offset}"
        )
    for record, why in report.rejected:
        lines.append(f"  rejected {record.coordinates} key {record.key}: {why}")
    for record, why in report.failed:
        lines.append(f"  failed   {record.coordinates} key {record.key}: {why}")
    if report.stopped:
        lines.append(f"  STOPPED: {report.stopped}")
    lines.append(report.figures_line())
    verdict = "OK" if report.ok else "FAILED"
    lines.append(f"result {verdict}")
    print("\n".join(lines), file=out, flush=True)
