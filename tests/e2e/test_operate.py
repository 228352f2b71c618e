"""The operator commands against a real local run: produce, status, stop, start.

The job runs as ``make run`` runs it (``python -m job`` on moto and tansu,
through :mod:`local.harness`); the commands get only the run's work dir, as an
operator would. What ``status`` prints must be what is there: the committed
offsets are the checkpoint's, the tips are the last records produced, the lag
is the number of records put after the job stopped, the snapshot is the
table's current one. ``stop`` must end the job gracefully within its bound
and say so from the job's exit record; ``start`` must start it again on the
run's work dir, and the job resume with nothing lost and nothing twice.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

from local.emulators import Emulators
from local.harness import LocalInstance
from local.job_process import JobProcess
from model.kinesis_ends import open_store
from model.kinesis_plan import BatchOffset, resolve
from model.polling import poll_until
from scripts import produce, start, stop
from scripts.status import __main__ as status
from tests.e2e.conftest import MakeLocal
from tests.fixtures import EXAMPLE_CDK_JSON

INSTANCE = "orders-ap-northeast-2"
STOP_BOUND_SEC = 120
# The first batch waits for the JVM and the Python workers: minutes on a busy machine.
COMMIT_BOUND_SEC = 420


def run(command: Any, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = command.main(list(args), out)
    return code, out.getvalue()


def committed_offset(local: LocalInstance) -> dict[str, Any]:
    """Where the last batch with a commit ended, read directly: its offset
    holds where it started, its tasks recorded the ends beside the checkpoint."""
    committed = local.committed_batches()
    offset = local.checkpoint_offsets().get(max(committed)) if committed else None
    if offset is None:
        return {}
    try:
        ends = resolve(BatchOffset.from_json(offset), open_store(local.config.source_ends_uri).get)
    except RuntimeError:  # an end not recorded yet
        return {}
    return {shard: state.to_json() for shard, state in ends.positions.items()}


def test_status_and_stop_on_a_running_job(
    emulators: Emulators, make_local: MakeLocal, tmp_path: Path
) -> None:
    local = make_local(emulators, INSTANCE, shards=2)
    job = local.start_job()
    target = ["--instance", INSTANCE, "--work-dir", str(tmp_path)]

    produced, produce_out = produce_and_wait_for_commit(local, job, target, tmp_path)
    tips: dict[str, str] = produced["last_sequence_by_shard"]
    snapshot = check_status_while_running(local, target, produced)

    began = time.monotonic()
    code, stop_out = run(stop, *target, "--timeout", str(STOP_BOUND_SEC), "--poll-sec", "0.5")
    stopped_after = time.monotonic() - began
    assert code == 0, stop_out + local.log_tail()
    assert "stopped gracefully" in stop_out and stopped_after < STOP_BOUND_SEC
    assert "(exit 0 stopped_on_request by operator: stop marker" in stop_out
    # make stop-job returns once the lease is free and the holder's process is
    # seen gone; the harness's handle on that process may learn its exit a
    # moment later (it reaps it), so the exit code is read with a short bound.
    assert job.wait(timeout=30) == 0, stop_out + local.log_tail()

    later = check_status_after_stop(target, tmp_path, tips, snapshot)
    code, text = run(status, *target)
    assert code == 0 and "not running" in text and "total" in text
    try:
        start_out = start_again_and_resume(local, target, [*produced["ids"], *later["ids"]])
    finally:
        local.stop_any_job(timeout=STOP_BOUND_SEC)
    # The commands' own output, for a reader of the test log (-s).
    print(produce_out, stop_out, text, start_out, sep="\n")


def start_again_and_resume(local: LocalInstance, target: list[str], ids: list[str]) -> str:
    """``start`` on the stopped run: refused a second time while the job
    runs; the job takes the records put while it was down, every id once. Its
    output."""
    assert local.config.stop_marker_path is not None
    Path(local.config.stop_marker_path).write_text("stop\n", encoding="utf-8")  # an operator's
    code, out = run(start, *target, "--cdk-json", str(EXAMPLE_CDK_JSON), "--poll-sec", "0.5")
    assert code == 0, out + local.log_tail()
    assert "cleared the operator's stop marker" in out and "job running (lease" in out
    again, refused = run(start, *target, "--wait-sec", "0")
    assert again == start.EXIT_REFUSED, refused

    def resumed() -> bool:
        assert local.job_running, local.log_tail()
        return set(local.table_ids()) >= set(ids)

    poll_until(
        resumed,
        timeout=COMMIT_BOUND_SEC,
        interval=1,
        on_timeout=lambda: TimeoutError(f"not resumed: {local.log_tail()}"),
    )
    table = local.table_ids()
    assert len(table) == len(set(table)) == len(set(ids)), "lost or duplicated ids"
    code, stopped = run(stop, *target, "--timeout", str(STOP_BOUND_SEC), "--poll-sec", "0.5")
    assert code == 0 and "stopped_on_request by operator" in stopped, stopped
    return out + stopped


def produce_and_wait_for_commit(
    local: LocalInstance, job: JobProcess, target: list[str], tmp_path: Path
) -> tuple[dict[str, Any], str]:
    """``produce`` 300 records to both shards; wait until the job's committed
    offsets are the last records produced. The producer's report, its output."""
    first_report = tmp_path / "first.json"
    code, produce_out = run(produce, *target, "--count", "300", "--report", str(first_report))
    assert code == 0, produce_out
    produced: dict[str, Any] = json.loads(first_report.read_text())
    tips: dict[str, str] = produced["last_sequence_by_shard"]
    assert set(tips) == {"shardId-000000000000", "shardId-000000000001"}

    def all_committed() -> bool:
        assert job.running, local.log_tail()
        return {s: o.get("after") for s, o in committed_offset(local).items()} == tips

    poll_until(
        all_committed,
        timeout=COMMIT_BOUND_SEC,
        interval=1,
        on_timeout=lambda: TimeoutError(
            f"offsets not committed: {committed_offset(local)}\n{local.log_tail()}"
        ),
    )
    return produced, produce_out


def check_status_while_running(
    local: LocalInstance, target: list[str], produced: dict[str, Any]
) -> dict[str, Any]:
    """``status --json`` of the running job: committed offsets at the tips, no
    lag, the table's snapshot and row count. The snapshot it named."""
    tips: dict[str, str] = produced["last_sequence_by_shard"]
    before = max(local.committed_batches())
    code, out = run(status, *target, "--json")
    assert code == 0
    seen = json.loads(out)
    assert seen["job"]["running"] is True
    # No-data batches (the de-duplication state's watermark) may commit meanwhile.
    assert before <= seen["checkpoint"]["batches"]["committed"] <= max(local.committed_batches())
    for shard in seen["shards"]:
        shard_id = shard["shard"]["shard_id"]
        assert shard["tip"] == tips[shard_id]
        assert shard["committed"] == {"kind": "AFTER_SEQUENCE_NUMBER", "sequence": tips[shard_id],
                                      "timestamp": None}  # fmt: skip
        assert shard["lag"]["records"] == 0 and shard["lag"]["exact"] is True
    table = local.table_figures()
    snapshot: dict[str, Any] = seen["table"]
    assert snapshot["snapshot_id"] is not None and snapshot["snapshots"] == table.snapshots
    assert snapshot["total_records"] == table.rows == len(produced["ids"])
    return snapshot


def check_status_after_stop(
    target: list[str], tmp_path: Path, tips: dict[str, str], snapshot: dict[str, Any]
) -> dict[str, Any]:
    """40 more records after the stop: ``status --json`` shows them as exact
    lag, new tips, the same committed offsets and the same snapshot."""
    later_report = tmp_path / "later.json"
    code, _ = run(
        produce, *target, "--count", "40", "--malformed-share", "0", "--duplicate-share", "0",
        "--report", str(later_report),
    )  # fmt: skip
    assert code == 0
    later = json.loads(later_report.read_text())

    code, out = run(status, *target, "--json")
    assert code == 0
    seen = json.loads(out)
    assert seen["job"]["running"] is False
    lag = {s["shard"]["shard_id"]: s["lag"] for s in seen["shards"]}
    assert {s: v["records"] for s, v in lag.items()} == {
        s: later["records_by_shard"].get(s, 0) for s in tips
    }
    assert all(v["exact"] for v in lag.values()) and seen["total_lag"]["records"] == 40
    assert all(v["oldest_unread_age_ms"] > 0 for v in lag.values() if v["records"])
    assert {s["shard"]["shard_id"]: s["tip"] for s in seen["shards"]} == {
        s: later["last_sequence_by_shard"].get(s, tips[s]) for s in tips
    }
    assert {s["shard"]["shard_id"]: s["committed"]["sequence"] for s in seen["shards"]} == tips
    assert seen["batches"], "the job's per-batch metrics were not read back"
    assert seen["table"]["snapshot_id"] == snapshot["snapshot_id"]
    return later
