"""The new user's first day through the real CDK CLI:
``cdk ls``/``cdk synth`` run ``python3 app.py`` exactly as ``cdk deploy`` does,
from a copy of cdk.json in a temporary directory.

* One instance and its Region's shared stack synthesize while every other
  instance still holds the example's placeholders
  (``-c streaming:instances=orders-eu-west-1``), listed shared stack first;
  the whole file still fails, listing the placeholders.
* A bad configuration prints its problems, one line each, and no traceback:
  the whole output (the CLI's line included) is at most 5 lines.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from infra.config import SELECTION_CONTEXT_KEY, placeholder_tls_uri, read_cdk_context
from tests.child_process import REPO, output, run
from tests.fixtures import EXAMPLE_CDK_JSON

CDK = REPO / "node_modules" / ".bin" / "cdk"
REAL_TLS = "s3://acme-emr-tls-111122223333/tls/orders-eu-west-1/certificates.zip"
MAX_ERROR_LINES = 5

pytestmark = pytest.mark.synth


def first_deploy_context() -> dict[str, Any]:
    """The example with its Regions' shared stacks, orders-eu-west-1 on its
    shared VPC and cluster with a real-looking TLS zip of its own; the two
    other instances keep the placeholders (a fresh clone, one instance filled in)."""
    context = copy.deepcopy(dict(read_cdk_context(EXAMPLE_CDK_JSON)))
    streaming = context["streaming"]
    streaming["shared"] = [{"region": "ap-northeast-2"}, {"region": "eu-west-1"}]
    for entry in streaming["instances"]:
        instance = f"{entry['domain']}-{entry['region']}"
        entry["emr"] = {
            **entry.get("emr", {}),
            "tls_certificates_s3_uri": placeholder_tls_uri(instance),
        }
        if instance == "orders-eu-west-1":
            entry["emr"]["tls_certificates_s3_uri"] = REAL_TLS
            entry["network"] = {"shared": True}
            entry["kafka"] = {"shared": True}
    return context


def run_cdk(tmp: Path, context: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    """``cdk <args>`` in ``tmp`` with ``context`` as its cdk.json's, the app
    being this repository's ``app.py`` on the venv's Python (as cdk.json says)."""
    if not CDK.exists():
        pytest.fail(f"{CDK} is missing: run make install")
    app = f"{sys.executable} {REPO / 'app.py'}"
    (tmp / "cdk.json").write_text(json.dumps({"app": app, "context": context}), encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        # What the Makefile exports: no end-of-life banner for this machine's Node.
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": node_major(),
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED": "true",
        "CDK_DISABLE_VERSION_CHECK": "1",
    }
    return run([str(CDK), *args], cwd=tmp, env=env)


def node_major() -> str:
    return output(["node", "-p", "process.versions.node.split('.')[0]"]).strip()


def test_one_instance_and_its_shared_stack_synthesize_while_others_hold_placeholders(
    tmp_path: Path,
) -> None:
    context = first_deploy_context()
    selected = run_cdk(tmp_path, context, "ls", "-c", f"{SELECTION_CONTEXT_KEY}=orders-eu-west-1")
    assert selected.returncode == 0, selected.stderr
    assert selected.stdout.split() == ["Streaming-shared-eu-west-1", "Streaming-orders-eu-west-1"]
    manifest = json.loads((tmp_path / "cdk.out" / "manifest.json").read_text())
    stacks = [
        n for n, a in manifest["artifacts"].items() if a["type"] == "aws:cloudformation:stack"
    ]
    assert stacks == ["Streaming-shared-eu-west-1", "Streaming-orders-eu-west-1"]
    assert "Streaming-shared-eu-west-1" in manifest["artifacts"][stacks[1]]["dependencies"]

    whole = run_cdk(tmp_path, context, "ls")
    assert whole.returncode != 0
    refused = [
        line for line in whole.stderr.splitlines() if "still the example placeholder" in line
    ]
    assert [line.split(":")[1].strip() for line in refused] == [
        "instance orders-ap-northeast-2",
        "instance payments-ap-northeast-2",
    ]
    assert "Traceback" not in whole.stderr


def _bad(change: str) -> dict[str, Any]:
    context = first_deploy_context()
    (orders,) = [i for i in context["streaming"]["instances"] if i["region"] == "eu-west-1"]
    if change == "misspelled key":
        orders["stream"] = {"shard_cont": 2}
    elif change == "shard count 0":
        orders["stream"] = {"shard_count": 0}
    else:
        orders["region"] = "eu-west-9"
    return context


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("misspelled key", "field stream.shard_cont: unknown field; allowed: retention_hours"),
        ("shard count 0", "field stream.shard_count: bad value 0; allowed: an integer >= 1"),
        ("unknown region", "field region: bad value 'eu-west-9'; allowed: a Region where"),
    ],
)
def test_a_bad_configuration_prints_its_problem_in_a_few_lines_without_a_traceback(
    tmp_path: Path, change: str, expected: str
) -> None:
    result = run_cdk(tmp_path, _bad(change), "synth", "--quiet")
    output = (result.stdout + result.stderr).strip().splitlines()
    print("\n".join(output))  # the closing note quotes it
    assert result.returncode != 0
    assert len(output) <= MAX_ERROR_LINES, output
    assert not [line for line in output if "Traceback" in line or 'File "' in line]
    assert any(expected in line for line in output), output
    assert not any("cluster_arn" in line for line in output), "the region is blamed, nothing else"


def _make_variable(name: str) -> str:
    """A variable as the Makefile exports it to its recipes."""
    show = f'show-it:\n\t@echo "$${name}"'
    return output(["make", "-s", "--no-print-directory", "--eval", show, "show-it"]).strip()


def test_make_synth_counts_the_stacks_of_its_own_run(tmp_path: Path) -> None:
    """Item 4: cdk.out is cleared first and the count comes from this run's
    manifest, so a template left by an earlier run is not counted."""
    out = tmp_path / "cdk.out"
    out.mkdir()
    for stale in ("Streaming-old-eu-west-1", "Streaming-a-eu-west-1", "Streaming-b-eu-west-1"):
        (out / f"{stale}.template.json").write_text("{}", encoding="utf-8")
    artifacts = {
        "Streaming-a-eu-west-1": {"type": "aws:cloudformation:stack"},
        "Streaming-b-eu-west-1": {"type": "aws:cloudformation:stack"},
        "Tree": {"type": "cdk:tree"},
    }
    (out / "manifest.json").write_text(json.dumps({"artifacts": artifacts}), encoding="utf-8")
    counted = output([sys.executable, "-c", _make_variable("SYNTH_COUNT")], cwd=tmp_path)
    assert counted.strip() == "2"
    dry_run = ["make", "-n", "--no-print-directory", "synth", f"STAMP={tmp_path / 'stamp'}"]
    recipe = run(dry_run).stdout.splitlines()
    clear = recipe.index("rm -rf cdk.out")
    assert any("cdk synth" in line for line in recipe[clear + 1 :])


def test_the_makefile_silences_the_node_banners_for_this_machines_node() -> None:
    assert _make_variable("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION") == node_major()
    assert _make_variable("AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED") == "true"
