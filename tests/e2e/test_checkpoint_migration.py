"""Moving a running instance from dropDuplicatesWithinWatermark to the timer
de-duplication, the way docs/operate.md says, on the emulators.

1. The job as it was (``tests.e2e.old_dedup_job``: the old plan) lands a mix of
   records and is stopped: a real old-style checkpoint, its records in the table.
2. The current job refuses that checkpoint at start: exit 2, the message names
   the checkpoint, what it holds and the fix; nothing is written.
3. ``scripts.migrate_checkpoint`` moves it aside (the job is stopped).
4. The job starts on a new checkpoint from TRIM_HORIZON, seeded from the table,
   while new events and re-sends of landed ids arrive: it reads the whole stream
   again, and the table gains every new id once and no duplicate; the old
   failures are re-sent to the topic (at least once, keyed by coordinates).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from local.emulators import Emulators
from local.harness import LocalInstance
from local.job_process import REPO_ROOT, JobProcess, clear_stop_marker, job_environment
from model.checkpoint_state import OLD_DEDUP_OPERATOR, inspect_checkpoint
from model.kinesis_ends import open_store
from model.kinesis_plan import BatchOffset, resolve
from model.polling import poll_until
from scripts import migrate_checkpoint
from tests.e2e.conftest import MakeLocal, mix

INSTANCE = "orders-ap-northeast-2"
# The first batch waits for the JVM and the Python workers: minutes on a busy machine.
BOUND_SEC = 480


def start_old_job(local: LocalInstance) -> JobProcess:
    """The job as deployed before the change, on this instance's config."""
    clear_stop_marker(local.config)
    config_path = local.root / "job.json"
    config_path.write_text(local.config.to_json(), encoding="utf-8")
    log = local.log_path.open("ab")
    log.write(f"\n===== old job {time.strftime('%H:%M:%S')} =====\n".encode())
    log.flush()
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.old_dedup_job", "--config", str(config_path)],
        cwd=str(REPO_ROOT),
        env=job_environment(dict(os.environ), local.config.region),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    old = JobProcess(local.config, config_path, local.log_path, process, log)
    local.job = old
    local.all_jobs.append(old)
    return old


def read_all_of_the_stream(local: LocalInstance, tips: dict[str, str]) -> bool:
    """The job's last committed batch ends at every shard's last record."""
    assert local.job is not None and local.job.running, local.log_tail()
    committed = local.committed_batches()
    if not committed:
        return False
    offset = local.checkpoint_offsets().get(max(committed))
    if offset is None:
        return False
    # The offset holds where the batch started; its tasks recorded the ends.
    try:
        ends = resolve(BatchOffset.from_json(offset), open_store(local.config.source_ends_uri).get)
    except RuntimeError:  # an end not recorded yet
        return False
    return all(
        (state := ends.positions.get(s)) is not None and state.after == tip
        for s, tip in tips.items()
    )


def test_an_old_checkpoint_is_refused_moved_aside_and_replaced_by_a_seeded_one(
    emulators: Emulators, make_local: MakeLocal, tmp_path: Path
) -> None:
    local = make_local(emulators, INSTANCE, shards=2)
    first = mix(240, seed=41, prefix="before")
    before = local.produce(first)
    old = start_old_job(local)
    local.wait_until_accounted(timeout=BOUND_SEC)
    assert old.stop(timeout=120) == 0, local.log_tail()
    landed = local.table_ids()
    assert sorted(landed) == sorted(before.expected_ids()), "the old plan landed each id once"
    failures_before = before.expected_failures()
    checkpoint = local.checkpoint
    assert [op.name for op in inspect_checkpoint(str(checkpoint)).operators] == [OLD_DEDUP_OPERATOR]

    # 2. The current job refuses it, before Spark starts.
    files_before = sorted(p for p in checkpoint.rglob("*") if p.name != "_lease")
    refused = local.start_job()
    assert refused.wait(timeout=180) == 2
    log = local.log_path.read_text(encoding="utf-8", errors="replace")
    assert f"checkpoint {checkpoint} holds de-duplication state this job cannot resume" in log
    assert f"make migrate-checkpoint INSTANCE={INSTANCE}" in log
    assert sorted(p for p in checkpoint.rglob("*") if p.name != "_lease") == files_before

    # 3. Moved aside by the operator command.
    out = io.StringIO()
    code = migrate_checkpoint.main(["--instance", INSTANCE, "--work-dir", str(tmp_path)], out)
    assert code == 0, out.getvalue()
    (aside,) = checkpoint.parent.glob(f"{checkpoint.name}.{OLD_DEDUP_OPERATOR}-*")
    assert not checkpoint.exists() and (aside / "commits").is_dir()
    print(out.getvalue())

    # 4. New events and re-sends of landed ids arrive; the job starts on a new checkpoint.
    resent = [r for r in first if r.event_id in set(landed)][:25]
    after = local.produce(mix(120, seed=42, prefix="after") + resent)
    tips = {**before.last_sequence_by_shard(), **after.last_sequence_by_shard()}
    job = local.start_job()
    poll_until(
        lambda: read_all_of_the_stream(local, tips),
        timeout=BOUND_SEC,
        interval=2,
        on_timeout=lambda: TimeoutError(f"stream not read to its tips {tips}\n{local.log_tail()}"),
    )
    local.wait_until_accounted(timeout=120)
    ids = Counter(local.table_ids())
    assert set(ids) == before.expected_ids() | after.expected_ids()
    assert [i for i, n in ids.items() if n > 1] == [], "no id landed twice"
    log = local.log_path.read_text(encoding="utf-8", errors="replace")
    seeded = re.findall(r"seed: (\d+) ids from \d+ data files", log)
    assert seeded == [str(len(set(landed)))], log[-3000:]
    topic = local.read_topic()
    again = {k: len(topic.reasons_by_key.get(k, [])) for k in failures_before}
    assert all(n >= 2 for n in again.values()), f"old failures re-sent at least once: {again}"
    assert job.stop(timeout=120) == 0, local.log_tail()
    assert (aside / "state" / "0" / "_metadata" / "metadata").exists(), "kept aside"
