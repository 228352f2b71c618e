"""Crash loop: the no-loss / no-duplicate promise under SIGKILL.

20,000 records (2 % malformed, 5 % re-sent ids) go in slices, half of them in
KPL aggregates of up to 10 (the source de-aggregates them, so a kill can land
in a batch of user records whose coordinates differ only by their
sub-sequence number); for each slice
the job is started on the same checkpoint and killed with SIGKILL (the whole
process group: driver, JVM, Python workers; no shutdown hook runs) at one of
two moments, aimed at by watching the table's files:

* **while data files are being written**: the first new Parquet file of a
  batch appears under the table's ``data/`` (the executors are writing; the
  commit has not happened);
* **between the Iceberg commit and Spark's**: the catalog's pointer to the
  table's current metadata moves (the batch's snapshot landed; read straight
  from the SQLite catalog, a cheap poll) and the job dies before Spark records
  the batch in the checkpoint's ``commits/``.

After each kill the moment it really hit is read back from the dead job's
state (the table's committed-batch mark against the checkpoint's commits, and
the orphan files left behind), so the counts asserted are what happened, not
what was aimed at. A reader thread scans the table through the catalog all
along; no scan may ever see part of a batch. A last run drains the stream. The
table must then hold every valid id exactly once and the topic every
malformed record with its reason.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Final

import pytest

from app.table.catalog import load_table
from app.table.commit import committed_batch
from local.emulators import Emulators
from local.harness import LocalInstance
from local.table import orphan_files, table_exists
from tests.e2e.conftest import MakeLocal, mix

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

RECORDS: Final = 20_000
SLICES: Final = 8
MAX_KILLS: Final = 14
# Groups of up to 10 events, every other group packed into one KPL aggregate.
AGGREGATE_SIZE: Final = 10
AGGREGATE_SHARE: Final = 0.5


def _files(root: Path, pattern: str) -> set[Path]:
    return set(root.rglob(pattern)) if root.exists() else set()


def _metadata_pointer(local: LocalInstance) -> str | None:
    """The table's current metadata location, read from the SQLite catalog."""
    path = local.root / "catalog.db"
    if not path.exists():
        return None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            row = db.execute(
                "SELECT metadata_location FROM iceberg_tables WHERE table_name = ?",
                (local.config.table,),
            ).fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def kill_when(local: LocalInstance, changed: Callable[[], bool], timeout: float) -> bool:
    """SIGKILL the job the moment ``changed()`` holds; False (and killed
    anyway) if it did not in time."""
    job = local.job
    assert job is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and job.running:
        if changed():
            job.kill()
            return True
        time.sleep(0.005)
    if job.running:
        job.kill()
    return False


def new_data_file(local: LocalInstance) -> Callable[[], bool]:
    before = _files(local.table_location, "*.parquet")
    return lambda: bool(_files(local.table_location, "*.parquet") - before)


def moved_pointer(local: LocalInstance) -> Callable[[], bool]:
    """True once the table exists and its pointer moved after that (a commit;
    creating the table is not one)."""
    first: list[str] = []

    def changed() -> bool:
        now = _metadata_pointer(local)
        if now is None:
            return False
        if not first:
            first.append(now)
            return False
        return now != first[0]

    return changed


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
            local.produce(
                pending.pop(0), aggregate_size=AGGREGATE_SIZE, aggregate_share=AGGREGATE_SHARE
            )
        orphans_before = _orphans(local)
        in_table_before = _committed_in_table(local)
        aim_after_commit = after_commit <= during_write
        trigger = moved_pointer(local) if aim_after_commit else new_data_file(local)
        trigger()  # the state before the start
        local.start_job()
        kill_when(local, trigger, timeout=240)
        kills += 1
        # What the kill hit, read from the dead job's state: this run committed a
        # batch that Spark's checkpoint does not have, or it left data files no
        # snapshot references.
        in_table = _committed_in_table(local)
        if in_table is not None and in_table != in_table_before and _table_ahead(local, in_table):
            after_commit += 1
        elif _orphans(local) - orphans_before:
            during_write += 1

    local.start_job()
    local.wait_until_accounted(timeout=600)
    assert local.stop_job(timeout=120) == 0, local.log_tail()
    reader.done.set()
    reader.join(timeout=60)
    summary = local.summary()
    rows = local.read_table(("batch_id", "sub_sequence_number"))
    final = Counter(r["batch_id"] for r in rows)
    from_aggregates = sum(r["sub_sequence_number"] is not None for r in rows)

    produced = len(local.produced)
    print(
        f"\ncrash loop: {produced} records, {kills} kills ({during_write} while data files "
        f"were written, {after_commit} between the Iceberg commit and Spark's), "
        f"{summary.duplicate_ids} duplicates, {len(summary.missing_ids)} missing ids, "
        f"{len(summary.missing_failures)} missing failure records, {len(reader.scans)} "
        f"concurrent scans, {summary.snapshots} snapshots, {len(_orphans(local))} orphan files, "
        f"{local.runs} runs; {summary.aggregates} KPL aggregates, {from_aggregates} rows "
        "read out of one"
    )
    assert produced == RECORDS
    # Half the groups went packed: thousands of events travelled in aggregates.
    assert summary.aggregates >= 500
    assert summary.kinesis_records < RECORDS
    assert from_aggregates >= 5_000
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


def _committed_in_table(local: LocalInstance) -> int | None:
    """The last batch id this query committed to the table (its table property)."""
    query_id = local.query_id()
    if query_id is None or not table_exists(local.config):
        return None
    return committed_batch(load_table(local.config), query_id)


def _table_ahead(local: LocalInstance, in_table: int) -> bool:
    """The table holds a batch Spark's checkpoint has not committed."""
    return in_table > max(local.committed_batches(), default=-1)
