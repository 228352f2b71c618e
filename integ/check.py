"""``python -m integ.check`` (in ``make test``) and ``make integ-snapshot``:
synthesize the integration app offline, compare its instance templates with
the committed snapshot through CDK's diff engine (integ/diff.js), and report
every difference, the destructive ones (replace, destroy, orphan) first-class
and the stateful among them named as such.

Any difference fails, as ``integ-runner``'s snapshot check does: a change is
accepted only by ``--update --reason`` (``make integ-snapshot``), which
rewrites the snapshot and records the reason and the destructive changes it
accepted in ``integ/snapshots/updates.json``; the check also fails when the
committed templates are not those of the last recorded update."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from integ import snapshot
from integ.app import build, load_config

DIFF_SCRIPT: Final = Path(__file__).with_name("diff.js")
# What holds data or the running job: replacing one loses or duplicates work.
STATEFUL_TYPES: Final = frozenset(
    {
        "AWS::S3::Bucket",
        "AWS::Kinesis::Stream",
        "AWS::Glue::Database",
        "AWS::Glue::Table",
        "AWS::MSK::Cluster",
        "AWS::MSK::Topic",
        "AWS::EMRServerless::Application",
        "AWS::EMR::Cluster",
        "AWS::EMR::Step",
        "Custom::ServerlessJobRun",
    }
)
EXIT_DIFFERENT: Final = 1


@dataclass(frozen=True)
class StackResult:
    """One stack's comparison, as integ/diff.js reports it."""

    stack: str
    status: str  # same, changed, added, removed
    report: str
    destructive: tuple[dict[str, str], ...]

    @classmethod
    def of(cls, item: dict[str, Any]) -> StackResult:
        return cls(item["stack"], item["status"], item["report"], tuple(item["destructive"]))


def describe(change: dict[str, str]) -> str:
    """One destructive change on one line, its stateful kind called out."""
    kind = "stateful" if change["type"] in STATEFUL_TYPES else "stateless"
    return f"{change['logicalId']} ({change['type']}, {kind}) - Impact: {change['impact']}"


def accepted_changes(results: Sequence[StackResult]) -> tuple[str, ...]:
    """What an update records: ``<stack>: <change>`` for each destructive change."""
    return tuple(f"{r.stack}: {describe(c)}" for r in results for c in r.destructive)


def render(results: Sequence[StackResult]) -> list[str]:
    """The report, in integ-runner's shape."""
    lines = ["Verifying integration test snapshots..."]
    for result in results:
        lines.append(f"  {result.status.upper():<10} {result.stack}")
        lines.extend(f"      {line}" for line in result.report.rstrip().splitlines())
    destructive = accepted_changes(results)
    if destructive:
        lines.append("!!! This snapshot contains destructive changes !!!")
        lines.extend(f"    Stack: {line}" for line in destructive)
        lines.append(
            "!!! If they are intended: make integ-snapshot REASON='<why>' and commit "
            "integ/snapshots/ !!!"
        )
    changed = sum(r.status != "same" for r in results)
    lines.append(f"Snapshot results: {changed} changed, {len(results) - changed} unchanged")
    return lines


def compare(expected_dir: Path, actual_dir: Path) -> list[StackResult]:
    """integ/diff.js over two directories of normalised templates."""
    done = subprocess.run(
        ["node", str(DIFF_SCRIPT), str(expected_dir), str(actual_dir)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "FORCE_COLOR": "0"},
    )
    return [StackResult.of(item) for item in json.loads(done.stdout)]


def synthesize(work: Path) -> dict[str, str]:
    """The integration app's normalised instance templates (synth offline)."""
    built = build(load_config(), outdir=str(work / "cdk.out"))
    built.app.synth()
    return snapshot.from_assembly(work / "cdk.out")


def run(update_reason: str | None, snapshot_dir: Path = snapshot.SNAPSHOT_DIR) -> int:
    with tempfile.TemporaryDirectory(prefix="integ-") as tmp:
        work = Path(tmp)
        actual = synthesize(work)
        actual_dir = work / "actual"
        actual_dir.mkdir()
        for name, text in actual.items():
            (actual_dir / f"{name}{snapshot.TEMPLATE_SUFFIX}").write_text(text, encoding="utf-8")
        snapshot_dir.mkdir(parents=True, exist_ok=True)
        results = compare(snapshot_dir, actual_dir)
    print("\n".join(render(results)))
    if update_reason is not None:
        update = snapshot.Update(
            update_reason.strip(), accepted_changes(results), snapshot.digest(actual)
        )
        snapshot.write(actual, update, snapshot_dir)
        print(f"snapshot updated in {snapshot_dir}: commit it (reason recorded in updates.json)")
        return 0
    problem = snapshot.unexplained(snapshot_dir)
    if problem:
        print(problem)
    return EXIT_DIFFERENT if problem or any(r.status != "same" for r in results) else 0


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m integ.check", description=__doc__)
    parser.add_argument(
        "--update",
        action="store_true",
        help="accept the differences: rewrite integ/snapshots/ (needs --reason)",
    )
    parser.add_argument("--reason", default="", help="why the snapshot changes (recorded)")
    args = parser.parse_args(argv)
    if args.update and not args.reason.strip():
        parser.error("--update needs --reason '<why the templates change>' (it is recorded)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    return run(args.reason if args.update else None)


if __name__ == "__main__":
    sys.exit(main())
