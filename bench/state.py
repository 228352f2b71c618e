"""State: the size of the de-duplication state after 1M records at the default horizon.

1M valid records with distinct ids go through the job's streaming query
(``prepare`` + ``foreachBatch(BatchProcessor)``, default 24 h horizon, RocksDB
state store with changelog checkpointing) in batches of 100,000; nothing
expires within the run (every arrival is within the horizon), so the state
holds one key per id. When ``growth`` ran first in the same run, its fill is
this fill (the same query), and its figures are read from there.

Figures, per batch, from the progress event's ``stateOperators[0]``:
``memoryUsedBytes`` and the RocksDB custom metrics (SST file bytes among
them), with the ids held counted from the rows fed (``numRowsTotal``: Spark's
own count is off in the job's conf); and the on-disk size of the checkpoint's ``state/``
directory (what the checkpoint store holds: changelog files, and snapshots
once the maintenance task made them). Bytes per key are those divided by the
ids held. A size, not a timing: measured once per batch, not repeated.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Final

from bench import stream
from bench.framework import Context, figure, write_result

NAME: Final = "state"
# The shape of the measured keys (bench.stream.unique_records).
KEY_NOTE: Final = (
    "keys are 'id:' + a random UUID (39 bytes); a longer or shorter id changes every key "
    "by the difference, in memory, in the SST files and in the changelog"
)


def _fill(ctx: Context, records: int, chunk: int) -> dict[str, Any]:
    config = stream.job_config(ctx, NAME)
    source = Path(config.checkpoint_location).parent / "source"
    start = stream.now()
    for index, first in enumerate(range(0, records, chunk)):
        stream.write_source_file(
            source,
            index,
            stream.unique_records(min(chunk, records - first), f"state{index}", start),
            start,
        )
    began = time.perf_counter()
    events = stream.run_to_end(stream.start_query(ctx.spark, config, source))
    return {
        "records": records,
        "batch_records": chunk,
        "events": [e for e in events if stream.ran_batch(e) and int(e["numInputRows"]) == chunk],
        "checkpoint": config.checkpoint_location,
        "state_dir_bytes": stream.directory_bytes(Path(config.checkpoint_location) / "state"),
        "seconds": time.perf_counter() - began,
    }


def run(ctx: Context) -> None:
    fill = ctx.shared.get("state_fill")
    source = "growth's (b) query, same run"
    if fill is None:
        records, chunk = (4_000, 2_000) if ctx.quick else (1_000_000, 100_000)
        fill = _fill(ctx, records, chunk)
        source = "its own query"
    per_batch = []
    held = 0
    for event in fill["events"]:
        figures = stream.state_figures(event)
        # Every record is a new valid id and none expires within the run: the
        # ids held are the rows fed so far (the job's conf turns Spark's own
        # count, numRowsTotal, off: model/spark_conf.py).
        held += int(event["numInputRows"])
        per_batch.append({"batch_id": int(event["batchId"]), **figures, "numRowsTotal": held})
    if not per_batch:
        raise RuntimeError("no state figures in the progress events")
    last = per_batch[-1]
    keys = last["numRowsTotal"]
    disk = int(fill["state_dir_bytes"])
    per_key = {
        "checkpoint_state_dir": round(disk / keys, 1),
        "rocksdb_sst_files": round(last["rocksdbSstFileSize"] / keys, 1),
        "memory_used": round(last["memoryUsedBytes"] / keys, 1),
    }
    write_result(
        ctx,
        NAME,
        {
            "what": __doc__,
            "fill": source,
            "records": fill["records"],
            "batch_records": fill["batch_records"],
            "horizon_hours": 24,
            "keys_in_state": keys,
            "checkpoint_state_dir_bytes": disk,
            "rocksdb_sst_file_bytes": last["rocksdbSstFileSize"],
            "memory_used_bytes": last["memoryUsedBytes"],
            "bytes_per_key": per_key,
            "key_shape": KEY_NOTE,
            "per_batch": per_batch,
        },
    )
    with figure(ctx, NAME, ncols=2) as (_, axes):
        rows = [b["numRowsTotal"] for b in per_batch]
        axes[0].plot(rows, [b["memoryUsedBytes"] / 2**20 for b in per_batch], "o-", label="memory")
        axes[0].plot(
            rows, [b["rocksdbSstFileSize"] / 2**20 for b in per_batch], "s-", label="SST files"
        )
        axes[0].set_xlabel("keys in the state")
        axes[0].set_ylabel("MiB")
        axes[0].set_title("RocksDB state by keys (progress events)", fontsize=10)
        axes[0].legend(fontsize=8)
        axes[1].bar(list(per_key), list(per_key.values()), color="#4c72b0")
        axes[1].set_title(f"bytes per key at {keys:,} keys", fontsize=10)
        axes[1].tick_params(axis="x", labelsize=8)
