"""Crash loop: the no-loss / no-duplicate promise under SIGKILL.

20,000 records (2 % malformed, 5 % re-sent ids) go in six slices; after each
slice the job is started on the same checkpoint and killed with SIGKILL (the
whole process group: driver, JVM, Python workers; no shutdown hook runs), half
of the times while the table write's staging directory exists, the other half
at a random moment. A last run drains the stream. The table must then hold
every valid id exactly once and the topic every malformed record with its
reason.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Final

import pytest

from app.sinks.table import STAGING_PREFIXES
from local.emulators import Emulators
from local.harness import LocalInstance
from tests.e2e.conftest import MakeLocal, mix, poll

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

RECORDS: Final = 20_000
KILLS: Final = 6


def staging_dirs(table: Path) -> list[Path]:
    """Directories a write in progress leaves under the table (not yet committed)."""
    if not table.exists():
        return []
    return [p for p in table.rglob("*") if p.is_dir() and p.name.startswith(STAGING_PREFIXES)]


def kill_during_write(local: LocalInstance, timeout: float) -> bool:
    """SIGKILL the job the moment a write is in flight; False if none was seen."""
    deadline = time.monotonic() + timeout
    job = local.job
    assert job is not None
    while time.monotonic() < deadline and job.running:
        if staging_dirs(local.table_location):
            job.kill()
            return True
        time.sleep(0.02)
    if job.running:
        job.kill()
    return False


def test_crash_loop_loses_and_duplicates_nothing(
    emulators: Emulators, make_local: MakeLocal, rng: random.Random
) -> None:
    local = make_local(emulators, overrides={"source": {"max_fetch_records_per_shard": 1_000}})
    records = mix(RECORDS, seed=11, prefix="crash", malformed_share=0.02, duplicate_share=0.05)
    slices = [records[i::KILLS] for i in range(KILLS)]

    kills = 0
    during_write = 0
    mid_batch = 0
    for index, piece in enumerate(slices):
        local.produce(piece)
        planned_before = set(local.checkpoint_offsets())
        local.start_job()
        if index % 2 == 0:
            during_write += kill_during_write(local, timeout=180)
        else:
            # A random moment inside the run's first batch: reading, sending
            # failures, writing, or between the write and the commit.
            poll(
                lambda before=planned_before: set(local.checkpoint_offsets()) - before != set(),
                "a new batch planned",
                timeout=180,
                interval=0.05,
            )
            time.sleep(rng.uniform(0.0, 6.0))
            assert local.job is not None and local.job.running, local.log_tail()
            local.job.kill()
        kills += 1
        mid_batch += bool(set(local.checkpoint_offsets()) - local.committed_batches())

    local.start_job()
    local.wait_until_accounted(timeout=600)
    assert local.stop_job(timeout=120) == 0, local.log_tail()
    spark_ids = local.table_ids(via="spark")
    assert sorted(spark_ids) == sorted(local.table_ids(via="files")), (
        "the metastore view and the table's files disagree"
    )
    summary = local.summary(table_ids=spark_ids)

    produced = len(local.produced)
    print(
        f"\ncrash loop: {produced} records, {kills} kills ({during_write} during a table "
        f"write, {mid_batch} leaving a planned batch uncommitted), "
        f"{summary.duplicate_ids} duplicates, "
        f"{len(summary.missing_ids)} missing ids, {len(summary.missing_failures)} missing "
        f"failure records, {summary.batches} batches committed over {local.runs} runs"
    )
    assert produced == RECORDS
    assert kills >= 5
    assert during_write >= 2, "kills did not land during table writes"
    assert mid_batch >= 3, "kills did not interrupt batches"
    assert summary.duplicate_ids == 0
    assert summary.missing_ids == ()
    assert summary.unexpected_ids == ()
    assert summary.rows == 20_000 - 400 - 1_000
    assert summary.missing_failures == ()
    assert summary.unexpected_failures == ()
    assert summary.wrong_reasons == {}
    assert summary.failure_records == 400
    assert summary.ok, summary.problems
