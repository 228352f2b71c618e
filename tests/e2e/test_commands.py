"""The README's user-facing commands, run as a user runs them.

``make run`` is ``python -m local``; ``make bench`` is ``python -m bench``;
``make help`` lists the targets. Each runs in a child process from the repo
root with the environment a shell would give it (no fixture state leaks in).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from local.harness import load_example_instances

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def _clean_env() -> dict[str, str]:
    """A user's shell: no AWS credentials or PySpark settings from conftest."""
    drop = ("AWS_", "PYSPARK_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def test_make_run_with_two_instances_passes_and_prints_the_summary(tmp_path: Path) -> None:
    """The first two instances the user's cdk.json declares (one when it
    declares one), as ``make run ARGS="--instances a,b"`` runs them."""
    chosen = [i.instance_id for i in load_example_instances()][:2]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "local",
            "--instances",
            ",".join(chosen),
            "--count",
            "800",
            "--work-dir",
            str(tmp_path / "work"),
        ],
        cwd=ROOT,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    for instance in chosen:
        assert f"instance {instance}" in out
    declared = {i.instance_id: i for i in load_example_instances()}
    efo = [i for i in chosen if declared[i].job.source.consumer_type == "SubscribeToShard"]
    # The summary names the reader; an enhanced fan-out instance (the example's
    # payments) reads through its consumer and the local SubscribeToShard endpoint.
    assert len(re.findall(r"enhanced fan-out \(SubscribeToShard via consumer", out)) == len(efo)
    assert len(re.findall(r"duplicate ids\s+0\b", out)) == len(chosen), out
    assert len(re.findall(r"records produced\s+800\b", out)) == len(chosen), out
    assert "PASS" in out
    report = (tmp_path / "work").resolve() / "report" / "index.html"
    assert f"report {report}" in out and all(
        f"<h2>{i}</h2>" in report.read_text(encoding="utf-8") for i in chosen
    ), out[-2000:]


def test_make_help_lists_every_readme_target() -> None:
    done = subprocess.run(
        ["make", "--no-print-directory", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    listed = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    assert {"run", "test", "synth", "check", "bench", "redeploy", "install"} <= listed
    operate = {"status", "stop-job", "produce", "reprocess", "report", "maintain"}
    assert operate <= listed, "the operator commands"
    assert {"test-fast", "test-synth", "test-integration", "test-e2e"} <= listed, "the tiers"
