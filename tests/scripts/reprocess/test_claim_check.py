"""The reprocess command reads a claim-checked original back before the hook
and the re-send see it; an original that is missing or does not match its
pointer fails that record and holds its partition."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

from model.claim_check import Pointer
from model.failure_store import FailureStore, FailureStoreSettings
from scripts.reprocess import run as reprocess
from scripts.reprocess.claim_check import resolver, store_reader
from scripts.reprocess.hook import FailedRecord, identity
from scripts.reprocess.plan import Positions, Selection, State
from tests.scripts.reprocess.test_run import Kinesis, failure


def pointed(record: FailedRecord, pointer: Pointer) -> FailedRecord:
    """``record`` as the job sends a claim-checked one: an excerpt as its value."""
    headers = (*record.headers, *((n, v.decode()) for n, v in pointer.headers()))
    return FailedRecord(
        data=b"excerpt",
        reason=record.reason,
        headers=headers,
        key=record.key,
        partition=record.partition,
        offset=record.offset,
        timestamp_ms=record.timestamp_ms,
    )


def stored(tmp_path: Path, name: str, data: bytes) -> Pointer:
    store = FailureStore(FailureStoreSettings(str(tmp_path), "us-east-1"))
    digest = hashlib.sha256(data).hexdigest()
    return Pointer(store.put(name, data, digest, {}), len(data), digest)


def run(records: list[FailedRecord], kinesis: Kinesis) -> reprocess.Report:
    return reprocess.reprocess(
        records,
        Positions({0: 0, 1: 0}),
        selection=Selection(),
        fix=identity,
        send=kinesis.send,
        commit=kinesis.commit,
        dry_run=False,
        out=io.StringIO(),
        resolve=resolver(store_reader("us-east-1")),
    )


def test_the_original_is_re_sent_not_the_excerpt(tmp_path: Path) -> None:
    original = os.urandom(1_040_000)
    big = pointed(failure(0, 0), stored(tmp_path, "s/sh/1", original))
    small = failure(1, 0, data=b"{small")
    kinesis = Kinesis()
    report = run([big, small], kinesis)
    assert report.ok, report.failed
    assert sorted(kinesis.stored) == [(0, 0, original), (1, 0, b"{small")]
    assert report.committed == {0: 1, 1: 1}


def test_a_missing_or_changed_original_fails_and_holds_its_partition(tmp_path: Path) -> None:
    good = stored(tmp_path, "s/sh/1", b"original")
    missing = Pointer(str(tmp_path / "s/sh/404"), 8, good.sha256)
    changed = stored(tmp_path, "s/sh/2", b"originaX")
    records = [
        pointed(failure(0, 0), missing),
        pointed(failure(0, 1), good),
        pointed(failure(1, 0), Pointer(changed.uri, good.size, good.sha256)),
    ]
    kinesis = Kinesis()
    report = run(records, kinesis)
    assert [(r.partition, r.offset) for r, _ in report.failed] == [(0, 0), (1, 0)]
    assert "claim-check get" in report.failed[0][1]
    assert "the pointer says" in report.failed[1][1]
    assert report.held == {0: (0, State.FAILED), 1: (0, State.FAILED)}
    assert [(p, o) for p, o, _ in kinesis.stored] == [(0, 1)], "the good one is still sent"
    assert not report.ok
