"""Reprocess failures end to end: the job writes malformed records to its failure
topic, ``python -m scripts.reprocess`` repairs them with a fix-up hook and puts
them back on the stream, and the job lands each repaired record exactly once,
also when the command is killed mid-way and run again, and when a later run
re-sends everything a second time.

:func:`repair` is the hook under test; the command imports it by name
(``--fix tests.e2e.test_reprocess:repair``) in its own process.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest

from local.emulators import Emulators
from local.harness import LocalInstance
from model.failure_record import record_key
from model.polling import poll_until
from producer.events import event_json, valid_event
from producer.stream_writer import ProduceReport
from scripts.reprocess.hook import FailedRecord, Reject
from scripts.reprocess.kafka import FailureTopicReader, Topic
from tests.e2e.conftest import MakeLocal, mix
from tests.fixtures import EXAMPLE_CDK_JSON

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT: Final = Path(__file__).resolve().parents[2]
HOOK: Final = "tests.e2e.test_reprocess:repair"
_ID: Final = re.compile(rb'"id"\s*:\s*"([^"\\]+)"')
_PROGRESS: Final = re.compile(r"^progress: read=\d+ re-sent=(\d+)", re.MULTILINE)


def repaired_id(data: bytes, key: str) -> str:
    """The id a broken record had, or (none left) one derived from where it sat
    in the stream: the same for every re-send, so the job can de-duplicate."""
    found = _ID.search(data)
    if found is not None:
        return found.group(1).decode("utf-8", errors="replace")
    return "fixed-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def repair(record: FailedRecord) -> bytes:
    """The fix-up hook: a valid event with the record's id (or a stable one),
    occurring when Kinesis first accepted it."""
    occurred = record.arrival_time
    if not occurred:
        raise Reject("no arrival_time header")
    event_id = repaired_id(record.data, record.key)
    return event_json(event_id, "repaired", occurred, {"reason": record.reason})


def command(local: LocalInstance, *argv: str) -> list[str]:
    return [
        sys.executable, "-m", "scripts.reprocess",
        "--instance", local.name, "--cdk-json", str(EXAMPLE_CDK_JSON),
        "--kafka-bootstrap", local.endpoints.kafka_bootstrap,
        "--kinesis-endpoint-url", local.endpoints.aws_url,
        *argv,
    ]  # fmt: skip


def run(local: LocalInstance, *argv: str) -> tuple[int, str]:
    done = subprocess.run(
        command(local, *argv),
        check=False,
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        timeout=180,
    )
    output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    return done.returncode, output


def figures(output: str) -> dict[str, int]:
    line = next((x for x in output.splitlines() if x.startswith("figures: ")), None)
    assert line is not None, output
    return {k: int(v) for k, v in re.findall(r"([\w-]+)=(\d+)", line)}


def committed(local: LocalInstance) -> dict[int, int | None]:
    topic = Topic(
        local.endpoints.kafka_bootstrap, "PLAINTEXT", local.config.region,
        local.config.kafka.topic, local.name,
    )  # fmt: skip
    reader = FailureTopicReader(topic, f"reprocess-{local.name}")
    try:
        return reader.committed(reader.partitions())
    finally:
        reader.close()


def table_ids(local: LocalInstance) -> Counter[str]:
    return Counter(str(r[local.id_column]) for r in local.read_table())


def wait_for_ids(local: LocalInstance, wanted: set[str], timeout: float = 240) -> Counter[str]:
    latest: list[Counter[str]] = [Counter()]

    def landed() -> bool:
        latest[0] = table_ids(local)
        return wanted <= set(latest[0])

    poll_until(
        landed,
        timeout=timeout,
        interval=2,
        on_timeout=lambda: TimeoutError(
            f"{len(wanted - set(latest[0]))} of {len(wanted)} ids not in the table after "
            f"{timeout:.0f}s\n{local.log_tail()}"
        ),
    )
    return latest[0]


def test_reprocess_repairs_failures_exactly_once_across_a_kill(
    emulators: Emulators, make_local: MakeLocal, tmp_path: Path
) -> None:
    local = make_local(emulators, shards=2)
    local.start_job()
    produced = local.produce(mix(400, seed=91, prefix="rp", malformed_share=0.15))
    local.wait_until_accounted(timeout=420)  # the first batch waits for the JVM

    # 1) The malformed records are on the topic, each with its reason.
    failures, repaired = failures_on_the_topic(local, produced)
    # A dry run shows every record the hook would re-send, and commits nothing.
    topic_records = dry_run_sends_nothing(local)

    # 2) The command repairs them; 4) killed once it re-sent some but not all.
    sent_before_kill, kept_total = killed_mid_way(local, tmp_path, topic_records)

    # The next run resumes at the committed positions and re-sends the rest.
    code, resumed_output = run(local, "--fix", HOOK)
    assert code == 0, resumed_output
    resumed = figures(resumed_output)
    assert resumed["failed"] == 0 and resumed["rejected"] == 0 and resumed["skipped"] == 0
    assert resumed["read"] == resumed["re-sent"] == topic_records - kept_total
    assert sum(v or 0 for v in committed(local).values()) == topic_records

    # 3) Each repaired record lands, exactly once.
    ids = wait_for_ids(local, repaired)
    assert {i for i in repaired if ids[i] != 1} == set()

    again = resent_from_offset_0(local, topic_records)

    assert local.job is not None and local.job.running
    assert local.stop_job() == 0, local.log_tail()
    ids = table_ids(local)
    duplicates = {i: n for i, n in ids.items() if n != 1}
    assert duplicates == {}, "nothing twice in the table"
    assert set(ids) == local.expected_ids() | repaired, "nothing lost, nothing extra"
    assert local.read_topic().keys == set(failures), "every repair was valid: no new failures"
    landed = len(repaired & set(ids))
    print("\n--- the resumed run's report ---")
    print("\n".join(x for x in resumed_output.splitlines() if not x.startswith("progress:")))
    print(
        f"reprocess figures: topic records {topic_records}; killed run re-sent "
        f"{sent_before_kill} (committed {kept_total}); resumed run read {resumed['read']}, "
        f"re-sent {resumed['re-sent']}, rejected {resumed['rejected']}, failed "
        f"{resumed['failed']}; from-offset-0 run re-sent {again['re-sent']}; "
        f"landed {landed} of {len(repaired)} repaired ids, each once"
    )


def failures_on_the_topic(
    local: LocalInstance, produced: ProduceReport
) -> tuple[set[str], set[str]]:
    """The 60 malformed records are on the topic and none of their repaired
    ids is in the table yet: the failures' keys, and the ids they repair to."""
    failures = local.expected_failures()
    assert len(failures) == 60
    assert local.read_topic().keys == set(failures)
    repaired = {
        repaired_id(p.record.data, record_key(produced.stream, p.shard_id, p.sequence_number))
        for p in produced.placed
        if p.record.is_failure
    }
    assert len(repaired) == 60
    assert not repaired & set(table_ids(local)), "no repaired id is in the table yet"
    return set(failures), repaired


def dry_run_sends_nothing(local: LocalInstance) -> int:
    """``--dry-run`` reports every record it would re-send and commits no
    offset. How many records the topic holds."""
    code, output = run(local, "--dry-run", "--fix", HOOK)
    assert code == 0, output
    topic_records = figures(output)["read"]
    assert topic_records >= 60
    assert figures(output)["would-send"] == topic_records
    assert all(v is None for v in committed(local).values())
    return topic_records


def killed_mid_way(local: LocalInstance, tmp_path: Path, topic_records: int) -> tuple[int, int]:
    """SIGKILL the command once it re-sent 10 records but not all: it commits
    no more than it sent (+ one batch). What it had sent, what it committed."""
    log_path = tmp_path / "reprocess-killed.log"
    with log_path.open("wb") as log:
        child = subprocess.Popen(
            command(local, "--fix", HOOK, "--batch-records", "5", "--rate", "10"),
            cwd=ROOT,
            env=dict(os.environ),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:

            def some_sent() -> bool:
                if child.poll() is not None:
                    raise AssertionError(
                        "the command finished before it could be killed:\n"
                        + log_path.read_text(errors="replace")
                    )
                sent = [int(n) for n in _PROGRESS.findall(log_path.read_text(errors="replace"))]
                return bool(sent) and sent[-1] >= 10

            poll_until(
                some_sent,
                timeout=120,
                interval=0.05,
                on_timeout=lambda: TimeoutError(log_path.read_text(errors="replace")),
            )
            child.send_signal(signal.SIGKILL)
        finally:
            if child.poll() is None:
                child.kill()
            child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    killed_output = log_path.read_text(errors="replace")
    sent_before_kill = [int(n) for n in _PROGRESS.findall(killed_output)][-1]
    assert 10 <= sent_before_kill < topic_records, killed_output
    assert "figures:" not in killed_output, "killed before its report"
    kept = committed(local)
    kept_total = sum(v or 0 for v in kept.values())
    assert 0 < kept_total <= sent_before_kill + 5, kept
    return sent_before_kill, kept_total


def resent_from_offset_0(local: LocalInstance, topic_records: int) -> dict[str, int]:
    """A third run from offset 0 re-sends every record again: the job's
    de-duplication absorbs them. Sentinels on every shard, after them, tell
    when the job has read past the re-sends. The run's figures."""
    code, output = run(local, "--fix", HOOK, "--from-offset", "0")
    assert code == 0, output
    again = figures(output)
    assert again["re-sent"] == topic_records
    now = datetime.now(UTC)
    sentinels = local.produce([valid_event(f"rp-sentinel-{i:02d}", now) for i in range(16)])
    assert len({p.shard_id for p in sentinels.placed}) == 2, "a sentinel on every shard"
    sentinel_ids = {p.record.event_id or "" for p in sentinels.placed}
    wait_for_ids(local, sentinel_ids)
    return again
