"""The handover when CloudFormation replaces the cluster: two launchers on two
"clusters" sharing one checkpoint.

Cluster A runs the old job (it holds the lease). Cluster B's YARN has no
application of that name: the step on B must still find the old version, by
its lease, stop it gracefully and only then submit. The same case run with
the launcher as it was before the lease-based handover (kept as
tests/e2e/fixtures/launcher_before_lease.sh; it asked its own YARN) shows
why: B's YARN is empty, so it writes no marker and submits at once; the new
job waits for the lease the old one keeps renewing and exits 3, and nothing
new runs.

Fakes, on PATH for the launcher only: ``aws`` maps ``s3://local/<path>`` to the
local file system (the lease's ``flock`` read as a fresh S3 lease while a live
process holds it, as model/lease.py's S3 lease reads while renewed), ``yarn`` is
cluster B's empty YARN, ``spark-submit`` records the submission; the harness
then plays B's YARN by starting the submitted job.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import pytest

from job.outcome import ExitCode
from local.emulators import Emulators
from model import contract
from model.exit_record import read_exit_record
from tests.e2e.conftest import MakeLocal, mix

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

REPO: Final = Path(__file__).resolve().parents[2]
LAUNCHER: Final = REPO / "bootstrap" / "streaming-spark-submit.sh"
# The launcher before the lease-based handover, as it was committed then.
LAUNCHER_BEFORE_LEASE: Final = Path(__file__).with_name("fixtures") / "launcher_before_lease.sh"

FAKE_AWS: Final = """
import json, os, sys, time
from pathlib import Path
from model.lease import file_lease_state

with open(os.environ["FAKE_DIR"] + "/aws.calls", "a") as calls:
    calls.write(" ".join(sys.argv[1:]) + "\\n")
words = [a for a in sys.argv[1:] if not a.startswith("--")]

def local(uri):
    assert uri.startswith("s3://local/"), uri
    return Path("/" + uri[len("s3://local/"):])

if words[:2] == ["s3", "cp"] and words[3] == "-":
    state = file_lease_state(local(words[2]))
    if state.running:
        print(json.dumps({"owner": state.holder, "expires_at": time.time() + 30}))
        sys.exit(0)
    print(f"fatal error: An error occurred (404) when calling the HeadObject operation: "
          f"Key {words[2]!r} does not exist", file=sys.stderr)
    sys.exit(1)
if words[:2] == ["s3", "cp"] and words[2] == "-":
    local(words[3]).write_bytes(sys.stdin.buffer.read())
elif words[:2] == ["s3", "rm"]:
    local(words[2]).unlink(missing_ok=True)
"""
FAKES: Final = {
    "spark-submit": 'printf "%s\\n" "$*" >> "$FAKE_DIR/submitted"\n',
    # Cluster B: nothing of this instance runs here.
    "yarn": 'echo "Total number of applications (application-types: [] and states: [...]):0"\n',
}


def fake_bin(root: Path) -> Path:
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in FAKES.items():
        path = bin_dir / name
        path.write_text("#!/usr/bin/env bash\nset -eu\n" + body, encoding="utf-8")
        path.chmod(0o755)
    aws = bin_dir / "aws"
    aws.write_text(f"#!{sys.executable}\n" + FAKE_AWS, encoding="utf-8")
    aws.chmod(0o755)
    return bin_dir


def s3(path: Path | str) -> str:
    return "s3://local" + str(path)


def launch(script: Path, fakes: Path, *args: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PATH": f"{fakes / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "FAKE_DIR": str(fakes),
        "PYTHONPATH": str(REPO),
    }
    return subprocess.Popen(
        ["bash", str(script), *args, "--", "spark-submit", "--deploy-mode", "cluster", "main.py"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_new_cluster_hands_over_from_the_old_one_through_the_lease(
    emulators: Emulators, make_local: MakeLocal, tmp_path: Path
) -> None:
    # A local lease is a flock (model/lease.py): its TTL never lapses while
    # the holder lives, so the stranded copy's wait only delays its exit 3.
    local = make_local(
        emulators,
        "orders-ap-northeast-2",
        shards=2,
        overrides={"lease_ttl_sec": 1, "lease_wait_sec": 2},
    )
    marker = local.config.stop_marker_path
    assert marker is not None
    old = local.start_job()  # cluster A
    local.produce(mix(600, seed=101, prefix="ho-a"))
    local.wait_until_accounted(timeout=300)

    # The launcher before the lease-based handover, on cluster B: it strands the instance.
    before = tmp_path / "before"
    fake_bin(before)
    script = before / "streaming-spark-submit.sh"
    script.write_text(LAUNCHER_BEFORE_LEASE.read_text(encoding="utf-8"), encoding="utf-8")
    handover = ["--app-name", contract.app_name(local.name), "--stop-marker", s3(marker)]
    stale = launch(script, before, *handover, "--poll-sec", "0.2")
    out, _ = stale.communicate(timeout=60)
    assert stale.returncode == 0, out
    assert (before / "submitted").exists(), "it submitted at once"
    calls = (before / "aws.calls").read_text(encoding="utf-8").splitlines()
    assert [c.split()[:2] for c in calls] == [["s3", "rm"]], "no stop marker was written"
    copy = local.start_second_copy()  # cluster B's YARN runs what was submitted
    assert copy.wait(timeout=180) == ExitCode.LEASE_HELD, copy.log_tail()
    assert old.running, "the old version runs on, until CloudFormation deletes its cluster"

    # The launcher of this version on cluster B: the lease says the old one runs.
    after = tmp_path / "after"
    fake_bin(after)
    checkpoint = local.config.checkpoint_location
    step = launch(
        LAUNCHER,
        after,
        *handover,
        "--lease", s3(f"{checkpoint}/_lease"),
        "--exit-record", s3(f"{checkpoint}/_exit"),
        "--stop-timeout-sec", "240",
        "--poll-sec", "0.5",
    )  # fmt: skip
    out, _ = step.communicate(timeout=300)
    assert step.returncode == 0, out
    submitted_at = time.time()
    assert (after / "submitted").exists()
    assert "asking it to stop" in out and "released" in out, out
    # The old version stopped gracefully and released the lease before the new
    # one was submitted (its process may still be tearing down Spark: the lease
    # is released, and the exit recorded, first).
    record = read_exit_record(checkpoint)
    assert record is not None
    assert (record.reason, record.stopped_by) == (
        contract.EXIT_STOPPED_ON_REQUEST,
        contract.STOP_BY_HANDOVER,
    )
    assert record.at < submitted_at
    assert old.wait(timeout=120) == 0, old.log_tail()
    assert not Path(marker).exists(), "consumed by the old version, cleared by the launcher"

    new = local.start_job()  # cluster B's YARN runs the new version
    local.produce(mix(600, seed=102, prefix="ho-b"))
    local.wait_until_accounted(timeout=300)
    assert new.running
    assert read_exit_record(checkpoint) == record, "the new version has not exited"
    assert local.stop_job() == 0, local.log_tail()
    summary = local.summary()
    assert summary.duplicate_ids == 0
    assert summary.missing_ids == ()
    assert summary.ok, summary.problems
