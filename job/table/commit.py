"""One Iceberg snapshot per micro-batch, exactly once.

How a batch commit stays exactly-once (the mechanism the crash loop relies on)
-----------------------------------------------------------------------------
Spark replays a batch (same id, same offsets) when the job died after the
batch started but before Spark recorded it in the checkpoint's ``commits/``.
The table commit decides what a replay does:

* **died before the Iceberg commit** (while data files were written, or just
  before the commit): nothing references the files written so far; readers
  never see them, and the replay writes its own. The leftovers are orphans,
  deleted by the orphan-file optimizer (AWS) or ``python -m local.maintain``;
* **died after the Iceberg commit, before Spark's**: the table property
  :data:`COMMITTED_PROPERTY` already holds
  ``<query id>:<batch id>`` of this batch, because it was set in the SAME
  commit as the batch's files. The replay finds it and skips the commit.

So the check costs one property read, whatever the table's history; each
snapshot also carries the query and batch id in its summary (the keys Iceberg's
own Spark streaming sink uses), for audits. The query id is the streaming
query's persistent id, stable across restarts from the same checkpoint; a new
checkpoint is a new query, whose batch ids start again from 0.

A single writer per table is guaranteed by :mod:`model.lease`; a concurrent
commit by a Glue optimizer (compaction, snapshot expiry) makes ours fail its
optimistic check, and pyiceberg retries it on the refreshed table within the
bounds set by :func:`model.table_properties.table_properties`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from job.retry import with_retries
from model.config import CatalogOptions, TableMaintenance
from model.table_layout import BATCH_ID_SUMMARY, QUERY_ID_SUMMARY

log = logging.getLogger(__name__)

# The table property that records the last batch this job committed:
# ``<query id>:<batch id>``. Written in the same commit as the batch's files,
# so reading it is enough to know whether a replayed batch already landed
# (no walk over the snapshot history, which expiry and Glue's compaction
# snapshots would make unreliable anyway).
COMMITTED_PROPERTY: Final = "streaming.committed-batch"


@dataclass(frozen=True)
class CommitResult:
    committed: bool  # False: this batch had landed before (a replay)
    snapshot_id: int | None
    data_files: int
    records: int


def committed_batch(table: Table, query_id: str) -> int | None:
    """The last batch id this query committed to ``table``, or None."""
    value = table.properties.get(COMMITTED_PROPERTY)
    if not value or ":" not in value:
        return None
    owner, _, batch = value.rpartition(":")
    if owner != query_id or not batch.isdigit():
        return None
    return int(batch)


def already_committed(table: Table, query_id: str, batch_id: int) -> bool:
    """Whether this query committed ``batch_id`` (or a later batch) to the
    table, as of the table's last refresh."""
    last = committed_batch(table, query_id)
    return last is not None and last >= batch_id


def commit_batch(
    table: Table,
    files: Sequence[DataFile],
    *,
    query_id: str,
    batch_id: int,
    options: CatalogOptions,
    fresh: bool = False,
) -> CommitResult:
    """Commit ``files`` as one snapshot unless this batch already landed.

    ``fresh``: the caller refreshed ``table`` for this batch and found the
    batch not committed (job/micro_batch.py does, before the pass), so the
    first attempt commits on it as it is: reading the table again would be a
    GetTable and a metadata GET on the batch's critical path for nothing. A
    commit by someone else since (a Glue optimizer's) fails pyiceberg's
    optimistic check, and pyiceberg refreshes and retries
    (``commit.retry.num-retries``, model/table_properties.py)."""
    records = sum(int(f.record_count) for f in files)
    attempts = 0

    def commit() -> bool:
        nonlocal attempts
        attempts += 1
        # A retry after an outage refreshes: it must see whether the failed
        # attempt landed before the connection dropped.
        if attempts > 1 or not fresh:
            table.refresh()
            if already_committed(table, query_id, batch_id):
                return False
        with table.transaction() as tx:
            tx.set_properties({COMMITTED_PROPERTY: f"{query_id}:{batch_id}"})
            summary = {QUERY_ID_SUMMARY: query_id, BATCH_ID_SUMMARY: str(batch_id)}
            with tx.update_snapshot(snapshot_properties=summary).merge_append() as append:
                for data_file in files:
                    append.append_data_file(data_file)
        return True

    if not with_retries(commit, f"commit batch {batch_id}", options):
        log.warning(
            "batch %d of query %s is already in %s (a replay after a crash between the "
            "table commit and the checkpoint commit): %d files not committed again",
            batch_id,
            query_id,
            ".".join(table.name()),
            len(files),
        )
        return CommitResult(False, None, len(files), records)
    snapshot = table.current_snapshot()
    return CommitResult(True, snapshot.snapshot_id if snapshot else None, len(files), records)


def expirable_snapshots(table: Table, maintenance: TableMaintenance) -> list[int]:
    """Every snapshot but the newest ``snapshots_to_retain`` (and the current).

    By count, not by age: every commit copies the whole snapshot list, so a
    commit's cost grows with the snapshots kept (``make bench`` growth: about
    1.6 ms per snapshot), and a 10 s trigger makes 8,640 snapshots a day. Safe
    for readers: expiring only edits the metadata, and the files stay until the
    orphan retention (``orphan_file_retention_days``) has passed."""
    snapshots = sorted(table.snapshots(), key=lambda s: s.timestamp_ms)
    keep = {s.snapshot_id for s in snapshots[-maintenance.snapshots_to_retain :]}
    current = table.current_snapshot()
    if current is not None:
        keep.add(current.snapshot_id)
    return [s.snapshot_id for s in snapshots if s.snapshot_id not in keep]


def expire_snapshots(table: Table, maintenance: TableMaintenance) -> int:
    """Drop expired snapshots from the metadata (a metadata-only commit: the
    files only they referenced become orphans, see the module docstring)."""
    ids = expirable_snapshots(table, maintenance)
    if ids:
        table.maintenance.expire_snapshots().by_ids(ids).commit()
        log.info("table %s: expired %d snapshots", ".".join(table.name()), len(ids))
    return len(ids)
