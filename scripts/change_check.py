"""``make change-check BEFORE=<the deployed cdk.json>``: before a deploy, what
CloudFormation would refuse or replace between the ``cdk.json`` your stacks
were deployed from and today's.

Synthesizes both in-process (offline, placeholders allowed, as ``make synth``)
and applies infra/template_changes.py: an export a deployed stack imports
must stay as it is, a stateful resource must keep its logical ID and its
replacement properties, a custom resource its service token. ``--instances``
narrows both syntheses as ``-c streaming:instances=`` does for a deploy of a
subset (the stacks it leaves out stay deployed, and their imports still count).

Exit codes: 0 nothing refused, 1 refusals (one line each, with the page that
says why), 2 a bad argument or ``cdk.json``.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from infra.config import SELECTION_CONTEXT_KEY, SYNTH_CHECK_CONTEXT_KEY, read_cdk_context
from infra.stacks.application import build_app
from infra.template_changes import Templates, refused_changes
from scripts.command import DEFAULT_CDK_JSON, EXIT_USAGE, OperatorError, first_line, run_command

EXIT_REFUSED = 1


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="make change-check", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "--before", type=Path, required=True, help="the cdk.json the stacks were deployed from"
    )
    parser.add_argument("--after", type=Path, default=DEFAULT_CDK_JSON, help="default: cdk.json")
    parser.add_argument(
        "--instances",
        help="the selection of the deploy (comma-separated ids or shared-<region>), as "
        "-c streaming:instances=",
    )
    return parser.parse_args(argv)


def synthesized(context: Mapping[str, Any], selection: str | None = None) -> dict[str, Any]:
    """``{stack name: template}`` of ``context``'s app (``selection``: its subset)."""
    context = {**context, SYNTH_CHECK_CONTEXT_KEY: True}
    if selection is not None:
        context[SELECTION_CONTEXT_KEY] = selection
    with tempfile.TemporaryDirectory(prefix="change-check-") as outdir:
        app, _stacks = build_app(context, outdir=outdir)
        assembly = app.synth()
        return {stack.stack_name: stack.template for stack in assembly.stacks}


def _context(path: Path) -> Mapping[str, Any]:
    try:
        return read_cdk_context(path)
    except (OSError, ValueError) as exc:
        raise OperatorError(EXIT_USAGE, f"{path}: {first_line(exc)}") from exc


def check(before: Templates, after: Templates) -> int:
    refusals = refused_changes(before, after)
    for refusal in refusals:
        print(f"refused: {refusal.line()}")
    stacks = ", ".join(sorted(after))
    if refusals:
        print(f"{len(refusals)} change(s) CloudFormation would refuse or that replace state")
        return EXIT_REFUSED
    print(f"ok: nothing refused for {stacks}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)

    def act() -> int:
        before_context, after_context = _context(args.before), _context(args.after)
        try:
            before = synthesized(before_context)
            after = synthesized(after_context, args.instances)
        except ValueError as exc:  # InstanceConfigError: one line, no traceback
            raise OperatorError(EXIT_USAGE, first_line(exc)) from exc
        return check(before, after)

    return run_command("change-check", act)


if __name__ == "__main__":
    raise SystemExit(main())
