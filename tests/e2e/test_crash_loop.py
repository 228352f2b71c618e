"""Crash loop: the no-loss / no-duplicate promise under SIGKILL.

20,000 records (2 % malformed, 5 % re-sent ids) go in slices; for each slice
the job is started on the same checkpoint and killed with SIGKILL (the whole
process group: driver, JVM, Python workers; no shutdown hook runs) at one of
two moments, aimed at by watching the table's files:

* **while data files are being written**: the first new Parquet file of a
  batch appears under the table's ``data/`` (the executors are writing; the
  commit has not happened);
* **between the Iceberg commit and Spark's**: a new ``metadata.json`` appears
  (the batch's snapshot landed) and the job dies before Spark records the
  batch in the checkpoint's ``commits/``.

After each kill the moment it really hit is read back from the dead job's
state (the table's committed-batch mark against the checkpoint's commits, and
the orphan files left behind), so the counts asserted are what happened, not
what was aimed at. A reader thread scans the table through the catalog all
along; no scan may ever see part of a batch. A last run drains the stream. The
table must then hold every valid id exactly once and the topic every
malformed record with its reason.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Final

import pytest

from app.sinks.iceberg_commit import committed_batch
from local.emulators import Emulators
from local.harness import LocalInstance
from local.table import load_table, orphan_files, table_exists
from tests.e2e.conftest import MakeLocal, mix

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

RECORDS: Final = 20_000
SLICES: Final = 8
MAX_KILLS: Final = 14


def _files(root: Path, pattern: str) -> set[Path]:
    return set(root.rglob(pattern)) if root.exists() else set()


def kill_when(local: LocalInstance, pattern: str, timeout: float) -> bool:
    """SIGKILL the job the moment a new file matching ``pattern`` appears
    under the table; False (and killed anyway) if none did in time."""
    job = local.job
    assert job is not None
    before = _files(local.table_location, pattern)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and job.running:
        if _files(local.table_location, pattern) - before:
            job.kill()
            return True
        time.sleep(0.005)
    if job.running:
        job.kill()
    return False


class Reader(threading.Thread):
    """Scans (batch id -> rows) of the current snapshot, over and over."""

    def __init__(self, local: LocalInstance) -> None:
        super().__init__(daemon=True)
        self.local = local
        self.scans: list[Counter[int]] = []
        self.errors: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            try:
                if table_exists(self.local.config):
                    table = load_table(self.local.config)
                    if table.current_snapshot() is not None:
                        column = table.scan(selected_fields=("batch_id",)).to_arrow()
                        self.scans.append(Counter(column.column("batch_id").to_pylist()))
            except Exception as exc:  # a scan racing a commit may fail; it must not lie
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self.done.wait(0.2)


def test_crash_loop_loses_and_duplicates_nothing(
    emulators: Emulators, make_local: MakeLocal
) -> None:
    local = make_local(emulators, overrides={"source": {"max_fetch_records_per_shard": 1_000}})
    records = mix(RECORDS, seed=11, prefix="crash", malformed_share=0.02, duplicate_share=0.05)
    slices = [records[i::SLICES] for i in range(SLICES)]
    reader = Reader(local)
    reader.start()

    kills = 0
    during_write = 0
    after_commit = 0
    pending = list(slices)
    while kills < MAX_KILLS and (during_write < 2 or after_commit < 2 or pending):
        if pending:
            local.produce(pending.pop(0))
        orphans_before = _orphans(local)
        local.start_job()
        aim_after_commit = after_commit <= during_write
        kill_when(local, "*.metadata.json" if aim_after_commit else "*.parquet", timeout=240)
        kills += 1
        # What the kill hit, read from the dead job's state.
        if _table_ahead_of_checkpoint(local):
            after_commit += 1
        elif _orphans(local) - orphans_before:
            during_write += 1

    local.start_job()
    local.wait_until_accounted(timeout=600)
    assert local.stop_job(timeout=120) == 0, local.log_tail()
    reader.done.set()
    reader.join(timeout=60)
    summary = local.summary()
    final = Counter(r["batch_id"] for r in local.read_table(("batch_id",)))

    produced = len(local.produced)
    print(
        f"\ncrash loop: {produced} records, {kills} kills ({during_write} while data files "
        f"were written, {after_commit} between the Iceberg commit and Spark's), "
        f"{summary.duplicate_ids} duplicates, {len(summary.missing_ids)} missing ids, "
        f"{len(summary.missing_failures)} missing failure records, {len(reader.scans)} "
        f"concurrent scans, {summary.snapshots} snapshots, {len(_orphans(local))} orphan files, "
        f"{local.runs} runs"
    )
    assert produced == RECORDS
    assert kills >= 6
    assert during_write >= 2, "kills did not land while data files were written"
    assert after_commit >= 2, "kills did not land between the table commit and Spark's"
    assert summary.duplicate_ids == 0
    assert summary.missing_ids == ()
    assert summary.unexpected_ids == ()
    assert summary.rows == 20_000 - 400 - 1_000
    assert summary.missing_failures == ()
    assert summary.unexpected_failures == ()
    assert summary.wrong_reasons == {}
    assert summary.failure_records == 400
    assert summary.ok, summary.problems
    # Every scan saw whole batches: each batch id it saw had its final row count.
    assert len(reader.scans) >= 10, reader.errors[-3:]
    partial = [
        (batch, rows, final[batch])
        for scan in reader.scans
        for batch, rows in scan.items()
        if rows != final[batch]
    ]
    assert partial == [], "a reader saw part of a batch"


def _orphans(local: LocalInstance) -> set[Path]:
    if not table_exists(local.config):
        return set()
    return set(orphan_files(load_table(local.config), timedelta(0), now=time.time() + 1))


def _table_ahead_of_checkpoint(local: LocalInstance) -> bool:
    """The table holds a batch Spark's checkpoint has not committed."""
    if not table_exists(local.config):
        return False
    query_id = local.query_id()
    if query_id is None:
        return False
    in_table = committed_batch(load_table(local.config), query_id)
    committed = local.committed_batches()
    return in_table is not None and in_table > max(committed, default=-1)
