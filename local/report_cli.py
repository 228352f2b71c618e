"""Render the run report from a metrics dump: ``make report ARGS="--metrics … --out …"``.

``make run`` writes its dump to ``<work dir>/metrics.json`` and renders the
report itself; this command draws the same report again from any dump
(format: :mod:`local.metrics_dump`), optionally with a checkpoint directory's
batches instead of the dump's (``--checkpoint DIR`` for a one-instance dump,
``--checkpoint INSTANCE=DIR`` otherwise, repeatable). Prints the page's path.

Exit codes: 0 written, 2 bad arguments or a dump/checkpoint that does not
have the documented shape (the message names the file and field).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from local.metrics_dump import DumpError
from local.report import render
from local.run_dump import load_dump, with_checkpoints

EXIT_OK, EXIT_USAGE = 0, 2


def checkpoint_arg(value: str) -> tuple[str | None, Path]:
    """``DIR`` or ``INSTANCE=DIR``."""
    name, sep, path = value.partition("=")
    if not sep:
        return None, Path(value)
    if not name or not path:
        raise argparse.ArgumentTypeError(f"{value!r}: expected DIR or INSTANCE=DIR")
    return name, Path(path)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m local.report_cli",
        description="Render the run report (HTML + PNG charts) from a metrics dump.",
    )
    p.add_argument(
        "--metrics", type=Path, required=True, help="metrics dump (make run: <work>/metrics.json)"
    )
    p.add_argument(
        "--checkpoint",
        type=checkpoint_arg,
        action="append",
        default=[],
        metavar="[INSTANCE=]DIR",
        help="a Spark checkpoint directory whose batches replace the dump's (repeatable)",
    )
    p.add_argument("--out", type=Path, required=True, help="output directory (index.html + PNGs)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        dump = with_checkpoints(load_dump(args.metrics), args.checkpoint)
    except DumpError as exc:
        print(f"report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    source = str(args.metrics) + "".join(
        f", checkpoint {f'{n}=' if n else ''}{p}" for n, p in args.checkpoint
    )
    page = render(dump, args.out, source=source)
    print(page)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
