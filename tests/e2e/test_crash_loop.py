"""Crash loop: the no-loss / no-duplicate promise under SIGKILL.

6,000 records (2 % malformed, 5 % re-sent ids) go in slices, half of them in
KPL aggregates of up to 5 (the source de-aggregates them, so a kill can land
in a batch of user records whose coordinates differ only by their
sub-sequence number); for each slice
the job is started on the same checkpoint and killed with SIGKILL (the whole
process group: driver, JVM, Python workers; no shutdown hook runs) at one of
two moments, aimed at by watching the table's files. A slice is the run's
share of the records still held back (twice as many parts as the fewest
runs), so a kill that misses its moment leaves records for every run the
moments still need: a run with nothing to write or replay can hit neither.
The last part is held back for a run that a late miss adds, or else goes to
the draining run. The two moments:

* **while data files are being written**: the first new Parquet file of a
  batch appears under the table's ``data/`` (the executors are writing; the
  commit has not happened);
* **between the Iceberg commit and Spark's**: the catalog's pointer to the
  table's current metadata moves (the batch's snapshot landed; read straight
  from the SQLite catalog, a cheap poll) and the job dies before Spark records
  the batch in the checkpoint's ``commits/``. That window is about 20 ms here,
  so once the commit's manifests appear in the table's ``metadata/`` the
  pointer is polled without pause until it moves.

After each kill the moment it really hit is read back from the dead job's
state (the table's committed-batch mark against the checkpoint's commits, and
the orphan files left behind), so the counts asserted are what happened, not
what was aimed at. A reader thread scans the table through the catalog all
along; no scan may ever see part of a batch. A last run drains the stream. The
table must then hold every valid id exactly once and the topic every
malformed record with its reason.

The first case launches every run as the instance's EMR Serverless job run
(spark-submit of the StartJobRun request); the second launches it as the EMR
step does (``python -m job``), over fewer records, read through enhanced
fan-out while the stream is resharded under the running job (a split, a
merge, another split): the same zeros. Each launch path has its crash loop.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import pytest

from job.table.catalog import load_table
from job.table.commit import committed_batch
from local.efo_endpoint import read_stats
from local.emulators import Emulators
from local.harness import LocalInstance
from local.serverless_launch import is_serverless
from local.table import orphan_files, table_exists
from tests.e2e.conftest import MakeLocal, mix

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

# Enough for every promise and no more: 2 % malformed and 5 % re-sent are
# exact counts, and groups of 5, every other one packed, make over 500 KPL
# aggregates (603). Each record more only lengthens the draining run.
RECORDS: Final = 6_000
# The instance the first case launches as an EMR Serverless job run.
SERVERLESS_INSTANCE: Final = "orders-eu-west-1"
# Each slice is one run killed: 4 forces at least 4 kills, the fewest that can
# hit each of the two moments twice (each one again after a recovery), which is
# what drain_and_check asserts; more slices only add restarts (about 25 s each
# on this machine) that prove nothing more.
SLICES: Final = 4
MAX_KILLS: Final = 14
# The records are cut into this many parts per slice, and each run gets its
# share of the parts left (crash_loop): two when every kill hits its moment
# (one for the last run, one part being held back), fewer after a miss, so
# records remain for every run the moments still need. (With one part per
# slice, a miss from the last slice on left a run with no records: it waited
# out kill_when's timeout, then again, up to MAX_KILLS.)
PARTS_PER_SLICE: Final = 2
# The second case: the same promises through SubscribeToShard subscriptions
# while the stream is resharded under the running job. Each reshard comes
# right after a start, before the job reads, so the parents hold their slice's
# records whatever its size; more records only lengthen the draining run.
RESHARD_RECORDS: Final = 3_000
# Runs 1 to 3 each reshard while they read: a fourth run is the fewest.
RESHARD_SLICES: Final = 4
RESHARD_MAX_KILLS: Final = 8
# Groups of up to 5 events, every other group packed into one KPL aggregate.
AGGREGATE_SIZE: Final = 5
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


# How long the poll stays without pause once a commit is imminent: the
# manifests come some milliseconds before the catalog's pointer moves.
IMMINENT_SEC: Final = 1.0
# Meanwhile the reader thread's scans must not hold the GIL for the default 5 ms.
IMMINENT_SWITCH_INTERVAL_SEC: Final = 0.0005


@dataclass
class Trigger:
    """``changed()`` holds once the aimed moment came; while ``imminent()``
    holds, it is about to, and is polled without pause."""

    changed: Callable[[], bool]
    imminent: Callable[[], bool] = lambda: False


def kill_when(local: LocalInstance, trigger: Trigger, timeout: float) -> bool:
    """SIGKILL the job the moment ``trigger.changed()`` holds; False (and
    killed anyway) if it did not in time."""
    job = local.job
    assert job is not None
    deadline = time.monotonic() + timeout
    switch_interval = sys.getswitchinterval()
    # While a commit is imminent the loop polls without sleeping (and the
    # interpreter switches threads more often) for up to IMMINENT_SEC.
    hot_until = 0.0
    try:
        while time.monotonic() < deadline and job.running:
            if trigger.changed():
                job.kill()
                return True
            now = time.monotonic()
            if now >= hot_until and trigger.imminent():
                hot_until = now + IMMINENT_SEC
                sys.setswitchinterval(IMMINENT_SWITCH_INTERVAL_SEC)
            if now >= hot_until:
                sys.setswitchinterval(switch_interval)
                time.sleep(0.005)
    finally:
        sys.setswitchinterval(switch_interval)
    if job.running:
        job.kill()
    return False


def new_data_file(local: LocalInstance) -> Trigger:
    before = _files(local.table_location, "*.parquet")
    return Trigger(lambda: bool(_files(local.table_location, "*.parquet") - before))


def _metadata_entries(local: LocalInstance) -> int:
    try:
        return len(os.listdir(local.table_location / "metadata"))
    except OSError:
        return 0


def moved_pointer(local: LocalInstance) -> Trigger:
    """True once the table exists and its pointer moved after that (a commit;
    creating the table is not one); imminent each time ``metadata/`` gains an
    entry (a commit writes its manifests, manifest list and metadata file
    there before it moves the pointer)."""
    first: list[str] = []
    entries = [_metadata_entries(local)]

    def changed() -> bool:
        now = _metadata_pointer(local)
        if now is None:
            return False
        if not first:
            first.append(now)
            return False
        return now != first[0]

    def imminent() -> bool:
        now = _metadata_entries(local)
        grew, entries[0] = now > entries[0], now
        return grew and bool(first)

    return Trigger(changed, imminent)


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


@dataclass
class Kills:
    total: int = 0
    during_write: int = 0
    after_commit: int = 0


def runs_needed(kills: Kills, slices: int) -> int:
    """The fewest killed runs still to come: one per slice not yet run, and
    one per hit each moment still lacks."""
    lacking = max(0, 2 - kills.during_write) + max(0, 2 - kills.after_commit)
    return max(slices - kills.total, lacking, 1)


def crash_loop(
    local: LocalInstance,
    parts: list[list[Any]],
    slices: int,
    max_kills: int,
    while_running: Callable[[int], None] = lambda _run: None,
) -> Kills:
    """Produce a slice (the run's share of the ``parts`` left), start the
    job, SIGKILL it at an aimed moment; again until both moments were hit
    twice in at least ``slices`` runs (or ``max_kills``). ``parts`` keeps what
    was not produced: the part held back, unless a run needed it.
    ``while_running(n)`` runs right after the n-th start, while the job reads
    (a reshard)."""
    kills = Kills()
    while kills.total < max_kills and (
        kills.during_write < 2 or kills.after_commit < 2 or kills.total < slices
    ):
        if parts:
            needed = runs_needed(kills, slices)
            share = max(1, len(parts) // needed)
            if needed == 1 and len(parts) > 1:
                share = len(parts) - 1  # one held back, for a run a miss adds
            produce(local, parts[:share])
            del parts[:share]
        orphans_before = _orphans(local)
        in_table_before = _committed_in_table(local)
        aim_after_commit = kills.after_commit <= kills.during_write
        trigger = moved_pointer(local) if aim_after_commit else new_data_file(local)
        trigger.changed()  # the state before the start
        local.start_job()
        while_running(kills.total)
        kill_when(local, trigger, timeout=240)
        kills.total += 1
        # What the kill hit, read from the dead job's state: this run committed a
        # batch that Spark's checkpoint does not have, or it left data files no
        # snapshot references.
        in_table = _committed_in_table(local)
        if in_table is not None and in_table != in_table_before and _table_ahead(local, in_table):
            kills.after_commit += 1
        elif _orphans(local) - orphans_before:
            kills.during_write += 1
    return kills


def produce(local: LocalInstance, parts: list[list[Any]]) -> None:
    records = [record for part in parts for record in part]
    if not records:
        return
    local.produce(
        records,
        aggregate_size=AGGREGATE_SIZE,
        aggregate_share=AGGREGATE_SHARE,
    )


def drain_and_check(local: LocalInstance, reader: Reader, kills: Kills, label: str) -> Any:
    """The last run drains the stream; every promise is checked. The summary."""
    local.start_job()
    local.wait_until_accounted(timeout=600)
    assert local.stop_job(timeout=120) == 0, local.log_tail()
    reader.done.set()
    reader.join(timeout=60)
    summary = local.summary()
    rows = local.read_table(("batch_id", "sub_sequence_number"))
    final = Counter(r["batch_id"] for r in rows)
    from_aggregates = sum(r["sub_sequence_number"] is not None for r in rows)
    figures = summary.figures
    print(
        f"\n{label}: {len(local.produced)} records, {kills.total} kills ({kills.during_write} "
        f"while data files were written, {kills.after_commit} between the Iceberg commit and "
        f"Spark's), {summary.duplicate_ids} duplicates, {len(summary.missing_ids)} missing ids, "
        f"{len(summary.missing_failures)} missing failure records, {len(reader.scans)} "
        f"concurrent scans, {figures.table_snapshots} snapshots, {len(_orphans(local))} orphan "
        f"files, {local.runs} runs; {figures.produced_aggregates} KPL aggregates, "
        f"{from_aggregates} rows read out of one"
    )
    assert kills.during_write >= 2, "kills did not land while data files were written"
    assert kills.after_commit >= 2, "kills did not land between the table commit and Spark's"
    assert summary.duplicate_ids == 0
    assert summary.missing_ids == ()
    assert summary.unexpected_ids == ()
    assert summary.missing_failures == ()
    assert summary.unexpected_failures == ()
    assert summary.wrong_reasons == {}
    assert summary.ok, summary.problems
    assert from_aggregates >= len(local.produced) // 4
    # Every scan saw whole batches: each batch id it saw had its final row count.
    assert len(reader.scans) >= 10, reader.errors[-3:]
    partial = [
        (batch, rows, final[batch])
        for scan in reader.scans
        for batch, rows in scan.items()
        if rows != final[batch]
    ]
    assert partial == [], "a reader saw part of a batch"
    return summary


def crash_and_drain(
    local: LocalInstance,
    records: list[Any],
    slices: int,
    max_kills: int,
    *,
    label: str,
    while_running: Callable[[int], None] = lambda _run: None,
) -> tuple[Kills, Any]:
    """The whole case: a reader scanning all along, the crash loop over
    ``records`` in ``slices``, the draining run and every check. The kills and
    the summary."""
    reader = Reader(local)
    reader.start()
    count = slices * PARTS_PER_SLICE
    parts = [records[i::count] for i in range(count)]
    kills = crash_loop(local, parts, slices, max_kills, while_running)
    produce(local, parts)  # the part held back, for the draining run
    return kills, drain_and_check(local, reader, kills, label)


def test_crash_loop_on_the_serverless_launch_path_loses_and_duplicates_nothing(
    emulators: Emulators,
    make_local: MakeLocal,
    instances: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every run of the job is launched as the instance's EMR Serverless job
    run would be (local/serverless_launch.py: the StartJobRun request's entry
    point, arguments and spark-submit parameters, the application's
    spark-defaults, the dependency archive, by spark-submit). The
    EMR step's launch (``python -m job``) has its crash loop in the next case:
    the job is the same, only how it is started differs."""
    # The e2e example's copy of the instance, on "compute": "serverless" (as cdk.json has it).
    serverless = instances[SERVERLESS_INSTANCE].model_copy(update={"compute": "serverless"})
    monkeypatch.setitem(instances, SERVERLESS_INSTANCE, serverless)
    local = make_local(
        emulators,
        SERVERLESS_INSTANCE,
        overrides={"source": {"max_fetch_records_per_shard": 1_000}},
    )
    assert is_serverless(local.instance)
    records = mix(RECORDS, seed=11, prefix="crash", malformed_share=0.02, duplicate_share=0.05)
    kills, summary = crash_and_drain(local, records, SLICES, MAX_KILLS, label="crash loop")
    assert len(local.produced) == RECORDS
    # Half the groups went packed: thousands of events travelled in aggregates
    # (from_aggregates >= RECORDS // 4 in drain_and_check).
    assert summary.figures.produced_aggregates >= 500
    assert summary.figures.produced_kinesis_records < RECORDS
    assert kills.total >= SLICES
    assert summary.rows == RECORDS - 120 - 300  # 2 % malformed, 5 % re-sent
    assert summary.failure_records == 120
    # Every run went through the job run's spark-submit, told --platform serverless.
    log = local.log_path.read_text(encoding="utf-8", errors="replace")
    assert log.count("target serverless: spark-submit of StartJobRun STREAMING") == local.runs
    assert "--platform serverless" in log and "pyspark/bin/spark-submit" in log


def _hash_range(shard: dict[str, Any]) -> tuple[int, int]:
    keys = shard["HashKeyRange"]
    return int(keys["StartingHashKey"]), int(keys["EndingHashKey"])


def split(local: LocalInstance, shard_id: str) -> tuple[str, str]:
    """SplitShard at the middle of ``shard_id``'s hash range; its children."""
    client, stream = local.kinesis, local.config.stream_name
    shards = {s["ShardId"]: s for s in client.list_shards(StreamName=stream)["Shards"]}
    low, high = _hash_range(shards[shard_id])
    client.split_shard(
        StreamName=stream, ShardToSplit=shard_id, NewStartingHashKey=str((low + high) // 2 + 1)
    )
    after = client.list_shards(StreamName=stream)["Shards"]
    children = sorted(s["ShardId"] for s in after if s.get("ParentShardId") == shard_id)
    assert len(children) == 2, after
    return children[0], children[1]


def test_crash_loop_through_enhanced_fan_out_across_a_split_and_a_merge(
    emulators: Emulators, make_local: MakeLocal
) -> None:
    """Resharding while the job reads through SubscribeToShard (the harness's
    loopback endpoint) and is killed: parents are read to their end before
    their children, through restarts; a killed task's subscription dies with
    its worker and the next run subscribes again from the recorded ends.

    While the second run reads, shard 0 is split (its unread records stay in
    it); the next slice goes to its children, and while the third run reads
    they are merged, holding records (``local.moto_server`` patches moto's
    MergeShards, which would copy both parents' records into the child, to
    leave them in the parents as Kinesis does); while the fourth reads, shard
    1 is split. So a child waits for two parents that are themselves children
    of a split, and every parent holds records its children must not
    overtake. (One case for both: enhanced fan-out and resharding each cost a
    crash loop of restarts, and the fresh read is the only part they do not
    share.)"""
    assert emulators.endpoints.kinesis_efo_url is not None
    local = make_local(
        emulators,
        overrides={
            "source": {
                "max_fetch_records_per_shard": 500,
                "describe_shard_interval_sec": 1,
                "consumer_type": "SubscribeToShard",
                "consumer_name": "orders-crash-efo",
            }
        },
    )
    assert local.config.source.consumer_type == "SubscribeToShard"
    served_before = read_stats(emulators.endpoints.kinesis_efo_url)["served"]
    records = mix(
        RESHARD_RECORDS, seed=23, prefix="reshard", malformed_share=0.02, duplicate_share=0.05
    )
    first, second = (s["ShardId"] for s in local.kinesis.list_shards(
        StreamName=local.config.stream_name)["Shards"])  # fmt: skip
    merged: list[str] = []

    def reshard(run: int) -> None:
        if run == 1:
            merged.extend(split(local, first))
        elif run == 2:
            left, right = merged
            local.kinesis.merge_shards(
                StreamName=local.config.stream_name,
                ShardToMerge=left,
                AdjacentShardToMerge=right,
            )
        elif run == 3:
            split(local, second)

    kills, summary = crash_and_drain(
        local,
        records,
        RESHARD_SLICES,
        RESHARD_MAX_KILLS,
        label="EFO crash loop, resharded",
        while_running=reshard,
    )
    assert len(local.produced) == RESHARD_RECORDS
    assert summary.rows == RESHARD_RECORDS - 60 - 150  # 2 % malformed, 5 % re-sent
    assert summary.failure_records == 60
    # The rows came through subscriptions: every run subscribed again.
    assert read_stats(emulators.endpoints.kinesis_efo_url)["served"] - served_before >= local.runs
    listed = local.kinesis.list_shards(StreamName=local.config.stream_name)["Shards"]
    assert len(listed) == 2 + 2 + 1 + 2  # both parents, the split pair, the merge, the split
    assert any(
        {s.get("ParentShardId"), s.get("AdjacentParentShardId")} == set(merged) for s in listed
    )
    by_shard = Counter(r["shard_id"] for r in local.read_table(("shard_id",)))
    assert len(by_shard) >= 4, by_shard  # records were read from parents and children
    assert all(by_shard[shard] > 0 for shard in merged), by_shard  # the merged pair held records
    assert kills.total >= 4


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
