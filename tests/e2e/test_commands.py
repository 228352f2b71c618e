"""The README's user-facing commands, run as a user runs them.

``make run`` is ``python -m local``; ``make bench`` is ``python -m bench``;
``make help`` lists the targets. Each runs in a child process from the repo
root with the environment a shell would give it (no fixture state leaks in).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from infra.config import SYNTH_CHECK_CONTEXT_KEY, load_instances, read_cdk_context
from infra.cost.prices import FIRST_READ, PRICES_READ
from infra.shared_config import load_shared
from local.harness import load_example_instances
from tests.child_process import output
from tests.fixtures import EXAMPLE_CDK_JSON

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def _clean_env() -> dict[str, str]:
    """A user's shell: no AWS credentials or PySpark settings from conftest."""
    drop = ("AWS_", "PYSPARK_")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def _run_as_user(
    argv: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python <argv>`` from the repo root in a user's shell (``env`` or
    :func:`_clean_env`), bounded; its output captured as text."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        env=_clean_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )


def test_make_run_with_two_instances_passes_and_prints_the_summary(tmp_path: Path) -> None:
    """The first two instances the user's cdk.json declares (one when it
    declares one), as ``make run ARGS="--instances a,b"`` runs them, side by
    side: also their isolation, since each instance's ids carry its domain
    and its summary fails on an id or a failure record it did not produce
    (``local/summary.py``: unexpected ids, unexpected failures)."""
    chosen = [i.instance_id for i in load_example_instances()][:2]
    done = _run_as_user(
        [
            "-m",
            "local",
            "--instances",
            ",".join(chosen),
            "--count",
            "800",
            "--work-dir",
            str(tmp_path / "work"),
            # Wider than make run's 240 s: under make test another worker's
            # case shares the machine with these two jobs (a bound, not a figure).
            "--timeout",
            "360",
        ]
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
    shown = output(["make", "--no-print-directory", "help"], cwd=ROOT, timeout=30)
    listed = {line.split()[0] for line in shown.splitlines() if line.strip()}
    assert {"run", "test", "synth", "check", "bench", "redeploy", "install"} <= listed
    operate = {"status", "stop-job", "start-job", "produce", "reprocess", "report", "maintain"}
    assert operate <= listed, "the operator commands"
    assert {"test-fast", "test-synth", "test-integration", "test-e2e"} <= listed, "the tiers"


def test_make_cost_prints_each_instance_with_list_prices_and_their_date() -> None:
    """``make cost`` is ``python -m scripts.cost`` on the user's cdk.json:
    every declared instance and shared stack, resource lines and a total,
    the prices' date and that they are list prices."""
    context = read_cdk_context(ROOT / "cdk.json")
    stacks = [c.stack_name for c in load_instances(context)]
    stacks += [c.stack_name for c in load_shared(context)]
    done = _run_as_user(["-m", "scripts.cost"])
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert f"LIST prices read {FIRST_READ} to {PRICES_READ}" in out
    printed = re.findall(r"^(Streaming-\S+) \(", out, re.MULTILINE)
    assert printed == stacks, out[:2000]
    totals = re.findall(r"total a month\s+\$([\d,]+\.\d\d)", out)
    assert len(totals) == len(stacks) and all(float(t.replace(",", "")) > 50 for t in totals)


def test_cdk_synth_prints_one_cost_line_per_instance_on_stderr_only(tmp_path: Path) -> None:
    """``app.py`` as the CDK CLI runs it (context in ``CDK_CONTEXT_JSON``):
    stdout stays empty, so ``cdk synth --quiet`` prints nothing else."""
    context = {**read_cdk_context(EXAMPLE_CDK_JSON), SYNTH_CHECK_CONTEXT_KEY: True}
    env = {**_clean_env(), "CDK_CONTEXT_JSON": json.dumps(context), "CDK_OUTDIR": str(tmp_path)}
    done = _run_as_user(["app.py"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    lines = re.findall(r"^cost: (Streaming-\S+) ~\$[\d,.]+/month", done.stderr, re.MULTILINE)
    assert sorted(lines) == [
        "Streaming-orders-ap-northeast-2",
        "Streaming-orders-eu-west-1",
        "Streaming-payments-ap-northeast-2",
    ], done.stderr[-2000:]
