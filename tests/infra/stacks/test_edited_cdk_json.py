"""Users own their instances: a checkout whose ``cdk.json`` gained an
instance, or lost one, still passes the checks of every declared instance.

A user's first edit is to ``cdk.json``. Each case copies what synthesis and
the tests need (the CDK entry, the model and the job, the infrastructure, the
bootstrap files, the JVM sources and the jar ``make install`` built, the local harness
the session conftest imports, the tests and their configuration) into a
temporary checkout, edits its ``cdk.json`` there and runs
tests/infra/stacks/test_declared_instances.py in it, in a child pytest, exactly as
``make test`` would in the user's checkout: cdk-nag, cfn-lint, isolation and
pinned logical IDs for whatever the edited file declares.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from infra.config import placeholder_tls_uri
from model import contract
from tests.infra.conftest import DECLARED_CDK_JSON, REPO_ROOT

pytestmark = pytest.mark.synth

# What the child session imports or synthesizes from (build/jvm: the jar
# `make install` compiled, so staging does not compile it again).
COPIED = (
    "app.py",
    "pyproject.toml",
    "model",
    "emr",
    "job",
    "infra",
    "artifacts",
    "bootstrap",
    "jvm",
    "build/jvm",
    "local",
    "producer",
)
CHECKS = "tests/infra/stacks/test_declared_instances.py"
Instances = list[dict[str, Any]]


def _unused_domain(instances: Instances) -> str:
    used = {entry["domain"] for entry in instances}
    return next(f"added{n}" for n in itertools.count() if f"added{n}" not in used)


def with_one_added(instances: Instances) -> Instances:
    """A fourth (n+1th) instance beside the first one, in its region: the pair
    the isolation checks find hardest (same account and region). It names a
    TLS zip of its own, as every instance must (infra.config.refuse_shared_tls)."""
    domain, region = _unused_domain(instances), instances[0]["region"]
    own = {"tls_certificates_s3_uri": placeholder_tls_uri(f"{domain}-{region}")}
    return [*instances, {"domain": domain, "region": region, "emr": own}]


def with_one_removed(instances: Instances) -> Instances:
    """Without the second instance (with a single one declared, it is
    replaced by a new one: a declaration must keep at least one)."""
    if len(instances) < 2:
        return with_one_added(instances)[1:]
    return [instances[0], *instances[2:]]


EDITS: dict[str, Callable[[Instances], Instances]] = {
    "one-added": with_one_added,
    "one-removed": with_one_removed,
}


def stack_name(entry: dict[str, Any]) -> str:
    return contract.stack_name(entry["domain"], entry["region"])


def checkout_with(root: Path, instances: Instances) -> Path:
    """A copy of the checkout whose cdk.json declares ``instances``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in COPIED:
        source = REPO_ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=ignore)
        else:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    shutil.copytree(REPO_ROOT / "tests", root / "tests", ignore=ignore)
    # The serverless instances' dependency archive (make install builds it;
    # ~130 MB): linked, not copied.
    archives = REPO_ROOT / "build" / "serverless"
    if archives.is_dir():
        (root / "build").mkdir(exist_ok=True)
        (root / "build" / "serverless").symlink_to(archives, target_is_directory=True)
    raw = json.loads(DECLARED_CDK_JSON.read_text(encoding="utf-8"))
    edited = copy.deepcopy(raw)
    edited["context"]["streaming"]["instances"] = instances
    (root / "cdk.json").write_text(json.dumps(edited, indent=2) + "\n", encoding="utf-8")
    return root


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_the_declared_instance_checks_pass_on_an_edited_cdk_json(tmp_path: Path, edit: str) -> None:
    declared = json.loads(DECLARED_CDK_JSON.read_text(encoding="utf-8"))
    before: Instances = declared["context"]["streaming"]["instances"]
    after = EDITS[edit](before)
    assert {stack_name(e) for e in after} != {stack_name(e) for e in before}
    root = checkout_with(tmp_path / "checkout", after)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", CHECKS, "-x", "-v", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    # The child checked the edited declaration: each instance by name, no other.
    checked = set(re.findall(r"\[(Streaming-[a-z0-9]+-[a-z0-9-]+)\] PASSED", output))
    assert checked == {stack_name(e) for e in after}, output[-4000:]
