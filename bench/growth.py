"""Growth: a micro-batch's cost must not grow with the table or the state.

The same 10,000-record micro-batch (the job's mix) through the job's streaming
query (``prepare`` + ``foreachBatch(BatchProcessor)``, Parquet file source,
one file per batch), timed from the query's progress
(``durationMs.triggerExecution``: trigger to checkpoint commit):

* (a) empty table, empty state: a fresh query and table per repeat; its first
  batch is an empty file (warms the query up, adds no key and no snapshot),
  its second the measured one;
* (b) after 2,000 earlier commits made the way the job makes them
  (``commit_batch`` of 4 small data files each, written with
  ``write_data_files``, snapshot expiry every ``expire_every_batches`` as the
  job calls it) AND with 1M ids in the de-duplication state (1M unique records
  fed through the same query first): the repeats are consecutive batches of
  the same shape (new ids: a batch of ids already seen would be all dropped).

ratio = median(b) / median(a) (bar: <= 1.2). The table's metadata is measured
before and after: metadata.json size, snapshots, snapshot and metadata log,
manifests in the current manifest list, data files.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa

from bench import stream
from bench.framework import Context, bars, figure, summary, write_result
from job.table.catalog import ensure_table, file_io_properties
from job.table.commit import commit_batch, expire_snapshots
from job.table.files import write_data_files

if TYPE_CHECKING:
    from pyiceberg.table import Table

    from model.config import JobConfig

NAME: Final = "growth"


@dataclass(frozen=True)
class Settings:
    """The measured batch and what (b) grows the table and the state by first."""

    batch: int  # records of a measured micro-batch
    commits: int  # (b) earlier commits (``--growth-commits`` overrides)
    state_keys: int  # (b) ids fed into the de-duplication state
    state_chunk: int  # (b) records a batch of that feed


FULL: Final = Settings(batch=10_000, commits=2_000, state_keys=1_000_000, state_chunk=100_000)
# --quick (the smoke test): a small table and state, one measured batch each
# side (Context.timed_rounds); the state fill's chunk differs from the batch,
# as state's reuse of the fill picks its batches by size.
QUICK: Final = Settings(batch=500, commits=10, state_keys=4_000, state_chunk=2_000)
BAR: Final = 1.2
FILES_PER_COMMIT: Final = 4
# Snapshots the default maintenance keeps at the default 10 s trigger: every
# snapshot younger than the 24 h retention (8,640 commits a day).
DAY_OF_SNAPSHOTS: Final = 24 * 3600 // 10


def metadata_figures(table: Table) -> dict[str, Any]:
    """How big the table's metadata is now."""
    table.refresh()
    metadata = table.metadata
    location = table.metadata_location
    path = Path(location.removeprefix("file://"))
    snapshot = table.current_snapshot()
    manifests = snapshot.manifests(table.io) if snapshot is not None else []
    summary_ = snapshot.summary if snapshot is not None else None
    return {
        "metadata_json_bytes": path.stat().st_size if path.exists() else None,
        "snapshots": len(metadata.snapshots),
        "snapshot_log_entries": len(metadata.snapshot_log),
        "metadata_log_entries": len(metadata.metadata_log),
        "manifest_list_entries": len(manifests),
        "data_files": int(summary_.get("total-data-files") or 0) if summary_ else 0,
        "records": int(summary_.get("total-records") or 0) if summary_ else 0,
    }


def _small_batch(table: Table, commit: int, rows: int = 5) -> pa.RecordBatch:
    """A few rows in the table's columns (the content does not matter)."""
    stamp = stream.now().replace(tzinfo=None)
    columns: dict[str, Any] = {}
    for field in table.schema().fields:
        kind = str(field.field_type)
        if kind == "string":
            columns[field.name] = [f"prefill-{commit}-{i}" for i in range(rows)]
        elif kind == "long":
            columns[field.name] = pa.array([commit] * rows, pa.int64())
        elif kind == "timestamp":
            columns[field.name] = pa.array([stamp] * rows, pa.timestamp("us"))
        else:  # pragma: no cover - the contract has only these three kinds
            raise ValueError(f"unexpected column type {kind}")
    return pa.RecordBatch.from_pydict(columns)


def prefill(table: Table, config: JobConfig, commits: int) -> dict[str, Any]:
    """``commits`` snapshots of 4 data files each, committed as the job does."""
    props = file_io_properties(config)
    maintenance = config.table_maintenance
    commit_seconds: list[float] = []
    expired = 0
    started = time.perf_counter()
    for index in range(commits):
        metadata_json = table.metadata.model_dump_json()
        files = []
        for _ in range(FILES_PER_COMMIT):
            files += write_data_files(metadata_json, props, [_small_batch(table, index)])
        began = time.perf_counter()
        commit_batch(table, files, query_id="prefill", batch_id=index, options=config.catalog)
        if index % maintenance.expire_every_batches == 0:
            expired += expire_snapshots(table, maintenance)
        commit_seconds.append(time.perf_counter() - began)
        if (index + 1) % 250 == 0:
            print(f"   prefill {index + 1}/{commits} commits", flush=True)
    tenth = max(1, commits // 10)
    fit = statistics.linear_regression(range(commits), commit_seconds) if commits > 1 else None
    return {
        "commits": commits,
        "files_per_commit": FILES_PER_COMMIT,
        "seconds": round(time.perf_counter() - started, 1),
        "snapshots_expired_by_the_job_rule": expired,
        "commit_seconds_first_tenth_median": round(statistics.median(commit_seconds[:tenth]), 3),
        "commit_seconds_last_tenth_median": round(statistics.median(commit_seconds[-tenth:]), 3),
        "commit_seconds_linear_fit": None
        if fit is None
        else {
            "seconds_per_snapshot_retained": round(fit.slope, 6),
            "intercept_seconds": round(fit.intercept, 3),
            f"projected_commit_seconds_at_{FULL.commits}_snapshots": round(
                fit.intercept + fit.slope * FULL.commits, 2
            ),
            f"projected_commit_seconds_at_{DAY_OF_SNAPSHOTS}_snapshots": round(
                fit.intercept + fit.slope * DAY_OF_SNAPSHOTS, 2
            ),
            "why": (
                f"{DAY_OF_SNAPSHOTS} = snapshots younger than the default 24 h retention at "
                "the default 10 s trigger: what the job's expiry rule lets the table hold"
            ),
        },
    }


def _measured(
    events: list[dict[str, Any]], split: stream.BatchTimings, size: int
) -> list[dict[str, Any]]:
    """The measured batches' figures, in order."""
    found = []
    for event in events:
        if not stream.ran_batch(event) or int(event["numInputRows"]) != size:
            continue
        batch_id = int(event["batchId"])
        durations = event["durationMs"]
        found.append(
            {
                "batch_id": batch_id,
                "trigger_seconds": durations["triggerExecution"] / 1000,
                "durations_ms": durations,
                "job_one_pass_seconds": split.one_pass.get(batch_id),
                "job_commit_seconds": split.table.get(batch_id),
                "state": {
                    k: v for k, v in stream.state_figures(event).items() if k != "customMetrics"
                },
            }
        )
    return found


def run(ctx: Context) -> None:
    spark = ctx.spark
    settings = QUICK if ctx.quick else FULL
    state_keys, chunk, size = settings.state_keys, settings.state_chunk, settings.batch
    commits = ctx.growth_commits or settings.commits
    start = stream.now()
    measured = [stream.mixed_records(size, f"m{rep}") for rep in range(ctx.timed_rounds)]

    # Warm-up, not counted: the JVM's first streaming batches (code generation,
    # Python workers, the Kafka producer) would otherwise be charged to (a).
    config = stream.job_config(ctx, f"{NAME}_warm")
    source = Path(config.checkpoint_location).parent / "source"
    stream.write_source_file(source, 0, [], start)
    stream.write_source_file(source, 1, stream.mixed_records(size, "warm"), start)
    stream.run_to_end(stream.start_query(spark, config, source))

    # (a) empty table, empty state: a fresh query and table per repeat.
    empty: list[dict[str, Any]] = []
    for rep in range(ctx.timed_rounds):
        config = stream.job_config(ctx, f"{NAME}_a{rep}")
        source = Path(config.checkpoint_location).parent / "source"
        stream.write_source_file(source, 0, [], start)
        stream.write_source_file(source, 1, measured[rep], start + timedelta(seconds=1))
        with stream.batch_timings() as split:
            events = stream.run_to_end(stream.start_query(spark, config, source))
        found = _measured(events, split, size)
        if len(found) != 1:
            raise RuntimeError(f"(a) repeat {rep}: {len(found)} batches of {size} records")
        empty.extend(found)

    # (b) the same shape of batch after `commits` commits and `state_keys` ids in the state.
    config = stream.job_config(ctx, f"{NAME}_b")
    table = ensure_table(config)
    before = metadata_figures(table)
    print(f"   prefill: {commits} commits of {FILES_PER_COMMIT} files", flush=True)
    filled = prefill(table, config, commits)
    after_prefill = metadata_figures(table)
    root = Path(config.checkpoint_location).parent
    source = root / "source"
    index = 0
    for first in range(0, state_keys, chunk):
        records = stream.unique_records(
            min(chunk, state_keys - first), f"state{first // chunk}", start
        )
        stream.write_source_file(source, index, records, start)
        index += 1
    for rep in range(ctx.timed_rounds):
        stream.write_source_file(source, index, measured[rep], start + timedelta(seconds=1 + rep))
        index += 1
    print(f"   stream: {state_keys:,} records into the state, then the measured batches")
    with stream.batch_timings() as split:
        fill_started = time.perf_counter()
        events = stream.run_to_end(stream.start_query(spark, config, source, table=table))
        fill_seconds = time.perf_counter() - fill_started
    grown = _measured(events, split, size)
    if len(grown) != ctx.timed_rounds:
        raise RuntimeError(f"(b): {len(grown)} batches of {size} records")
    fill_events = [e for e in events if stream.ran_batch(e) and int(e["numInputRows"]) == chunk]
    ctx.shared["state_fill"] = {
        "records": state_keys,
        "batch_records": chunk,
        "events": fill_events,
        "checkpoint": config.checkpoint_location,
        "state_dir_bytes": stream.directory_bytes(Path(config.checkpoint_location) / "state"),
        "seconds": fill_seconds,
    }
    after_batches = metadata_figures(table)
    # What the job's own expiry does (it runs every `expire_every_batches`
    # commits): it keeps the newest `snapshots_to_retain`, whatever their age.
    maintenance = config.table_maintenance
    expired = expire_snapshots(table, maintenance)
    after_expiry = metadata_figures(table)

    a = [m["trigger_seconds"] for m in empty]
    b = [m["trigger_seconds"] for m in grown]
    ratio = statistics.median(b) / statistics.median(a)
    growth_row = {
        "before_prefill": before,
        "after_prefill": after_prefill,
        "after_state_fill_and_measured_batches": after_batches,
        "after_expiry_a_retention_later": {**after_expiry, "expired": expired},
    }
    write_result(
        ctx,
        NAME,
        {
            "what": __doc__,
            "batch_records": size,
            "mix": {"malformed_share": 0.02, "duplicate_share": 0.05},
            "a_empty_trigger_seconds": summary(a),
            "b_grown_trigger_seconds": summary(b),
            "ratio_b_to_a": {
                "of_medians": round(ratio, 3),
                "bar": f"<= {BAR}",
                "met": ratio <= BAR,
            },
            "a_batches": empty,
            "b_batches": grown,
            "prefill": filled,
            "commits_of_a_full_run": FULL.commits,
            "state_fill": {
                "records": state_keys,
                "batches": len(fill_events),
                "seconds_with_measured_batches": round(fill_seconds, 1),
            },
            "table_maintenance": maintenance.model_dump(),
            "table_metadata": growth_row,
            "metadata_method": (
                "metadata.json size on disk; snapshots, snapshot-log and metadata-log "
                "entries from the table metadata; manifest_list_entries = manifests in "
                "the current snapshot's manifest list; data_files/records from the "
                "current snapshot's summary totals. The last row calls the job's "
                "expire_snapshots with a clock one retention period later."
            ),
        },
    )
    stages = list(growth_row)
    with figure(ctx, NAME, ncols=3, width=4.6) as (_, axes):
        bars(
            axes[0],
            ["(a) empty", f"(b) {commits:,} commits\n{state_keys:,} ids"],
            [statistics.median(a), statistics.median(b)],
            f"{size:,}-record batch, trigger to commit",
            "seconds (median)",
        )
        bars(
            axes[1],
            [s.replace("_", " ")[:22] for s in stages],
            [growth_row[s]["metadata_json_bytes"] / 1024 for s in stages],
            "metadata.json size",
            "KiB",
        )
        bars(
            axes[2],
            [s.replace("_", " ")[:22] for s in stages],
            [growth_row[s]["snapshots"] for s in stages],
            "snapshots (manifests in labels)",
            "count",
        )
        for i, s in enumerate(stages):
            axes[2].annotate(
                f"{growth_row[s]['manifest_list_entries']} manifests",
                (i, 0),
                ha="center",
                va="bottom",
                fontsize=7,
            )
