"""``make integ`` (``python -m integ.run``): one throwaway integration
instance's life on a real account, with the pinned CDK CLI, in a work
directory whose ``cdk.json`` declares only that instance (so the operator
commands find it there, and the shipped ``cdk.json`` is not read):

deploy (records produced, assertions awaited), update (``integ/update.json``,
assertions again), stop (``scripts.stop``) and start (``scripts.start``),
assertions again, destroy, then a check that no stack is left. A failed step
still destroys, unless ``--keep``.

``--dry-run`` needs no account: it synthesizes and prints what each step
would deploy and run. ``integ-runner`` would be CDK's tool for this; it
cannot read this aws-cdk-lib's assembly (docs/integ.md), so the same
sequence runs through the CDK CLI the project pins."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from infra.config import CONTEXT_KEY, SELECTION_CONTEXT_KEY, SYNTH_CHECK_CONTEXT_KEY
from integ.app import build, instance_ids, load_config

ROOT: Final = Path(__file__).resolve().parents[1]
UPDATE_PATH: Final = Path(__file__).with_name("update.json")
DEFAULT_WORK: Final = Path(".work/integ")
CDK: Final = ("npx", "--no-install", "cdk")
STOP_TIMEOUT_SEC: Final = 900
EXIT_FAILED: Final = 1


@dataclass(frozen=True)
class Step:
    """One command of the run, and what it proves."""

    name: str
    argv: tuple[str, ...]
    what: str
    # Written to the work directory's cdk.json before the step runs.
    context: Mapping[str, Any] | None = None


def instance_context(
    base: Mapping[str, Any], instance: str, overlay: Mapping[str, Any] | None, tls_uri: str
) -> dict[str, Any]:
    """The work directory's context: ``base`` with only ``instance`` selected,
    placeholders refused (a real deploy), ``overlay`` merged into the
    instance's entry, and the EMR TLS zip when given."""
    context: dict[str, Any] = json.loads(json.dumps(base))
    context.pop(SYNTH_CHECK_CONTEXT_KEY, None)
    context[SELECTION_CONTEXT_KEY] = instance
    for entry in context[CONTEXT_KEY]["instances"]:
        if f"{entry['domain']}-{entry['region']}" != instance:
            continue
        for section, values in (overlay or {}).items():
            entry[section] = {**entry.get(section, {}), **values}
        if tls_uri:
            entry.setdefault("emr", {})["tls_certificates_s3_uri"] = tls_uri
    return context


def plan(
    instance: str,
    python: str,
    base: Mapping[str, Any],
    update: Mapping[str, Any],
    tls_uri: str = "",
) -> list[Step]:
    """The steps, in order (pure: the dry run prints them, the run executes them)."""
    first = instance_context(base, instance, None, tls_uri)
    updated = instance_context(base, instance, update.get(instance), tls_uri)
    deploy = (*CDK, "deploy", "--all", "--require-approval", "never", "--force")
    operator = (python, "-m")
    return [
        Step(
            "deploy",
            deploy,
            "instance + assertion stacks: records in, job running, "
            "rows committed, failures counted",
            first,
        ),
        Step(
            "update",
            deploy,
            f"the update {json.dumps(update.get(instance, {}))}, then the same assertions",
            updated,
        ),
        Step(
            "stop",
            (*operator, "scripts.stop", "--instance", instance, "--timeout", str(STOP_TIMEOUT_SEC)),
            "graceful stop through the stop marker",
        ),
        Step(
            "start",
            (*operator, "scripts.start", "--instance", instance),
            "start the stopped job with the stack's own request or step",
        ),
        Step("assert", deploy, "the assertions again, on the restarted job", updated),
        Step("destroy", (*CDK, "destroy", "--all", "--force"), "delete both stacks"),
        Step(
            "leftovers",
            (*operator, "integ.leftovers", instance),
            "no stack of the instance is left",
        ),
    ]


def describe_assembly(assembly: Path, instance: str) -> list[str]:
    """What a deploy of ``instance`` creates: each stack and its resources by type."""
    lines: list[str] = []
    for template in sorted(assembly.glob("*.template.json")):
        if not template.name.removesuffix(".template.json").endswith(instance):
            continue
        resources = json.loads(template.read_text(encoding="utf-8")).get("Resources", {})
        counts = Counter(resource["Type"] for resource in resources.values())
        lines.append(
            f"  {template.name.removesuffix('.template.json')}: {len(resources)} resources"
        )
        lines.extend(f"    {count:>3} {kind}" for kind, count in sorted(counts.items()))
    return lines


def render_plan(steps: Sequence[Step]) -> list[str]:
    return [
        f"  {index}. {step.name:<9} {shlex.join(step.argv)}\n       {step.what}"
        for index, step in enumerate(steps, start=1)
    ]


def execute(steps: Sequence[Step], work: Path, keep: bool) -> int:
    """Run the steps in ``work``; on a failure, destroy (unless ``keep``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    by_name = {step.name: step for step in steps}
    for step in steps:
        if step.context is not None:
            app = f"{shlex.quote(sys.executable)} -m integ.app"
            cdk_json = {"app": app, "context": step.context}
            (work / "cdk.json").write_text(json.dumps(cdk_json, indent=1), encoding="utf-8")
        print(f"integ: {step.name}: {shlex.join(step.argv)}", flush=True)
        if subprocess.run(step.argv, cwd=work, env=env, check=False).returncode != 0:
            print(f"integ: step {step.name} failed", file=sys.stderr)
            if not keep and step.name not in ("destroy", "leftovers"):
                cleanup = by_name["destroy"]
                subprocess.run(cleanup.argv, cwd=work, env=env, check=False)
            return EXIT_FAILED
    return 0


def parse(argv: Sequence[str], tests: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m integ.run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--test",
        choices=tests,
        default="serverless",
        help="which integration instance (default: serverless)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="synthesize and print what would be deployed and run; no account",
    )
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK)
    parser.add_argument(
        "--tls-certificates-s3-uri",
        default="",
        help="the EMR instance's TLS zip (make certs); required for --test emr",
    )
    parser.add_argument("--keep", action="store_true", help="do not destroy after a failure")
    parser.add_argument(
        "--assembly",
        type=Path,
        help="describe this already synthesized assembly instead of synthesizing",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    base = load_config()
    ids = instance_ids(base)
    args = parse(sys.argv[1:] if argv is None else argv, sorted(ids))
    instance = ids[args.test]
    update = json.loads(UPDATE_PATH.read_text(encoding="utf-8"))
    steps = plan(instance, sys.executable, base, update, args.tls_certificates_s3_uri)
    if not args.dry_run:
        if args.test == "emr" and not args.tls_certificates_s3_uri:
            print(
                "integ: --test emr: field --tls-certificates-s3-uri: empty; allowed: the "
                "s3:// URI make certs prints",
                file=sys.stderr,
            )
            return 2
        args.work_dir.mkdir(parents=True, exist_ok=True)
        return execute(steps, args.work_dir, args.keep)
    print(f"integ (dry run): {args.test} instance {instance}; it would deploy:")
    if args.assembly is not None:
        print("\n".join(describe_assembly(args.assembly, instance)))
    else:
        with tempfile.TemporaryDirectory(prefix="integ-plan-") as tmp:
            # The example's TLS placeholder is allowed here: nothing is deployed.
            context = {**(steps[0].context or {}), SYNTH_CHECK_CONTEXT_KEY: True}
            build(context, outdir=tmp).app.synth()
            print("\n".join(describe_assembly(Path(tmp), instance)))
    print(f"and run, in {args.work_dir} (its cdk.json declares {instance} only):")
    print("\n".join(render_plan(steps)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
