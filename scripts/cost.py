"""``make cost``: what each declared instance costs a month, before deploy.

Synthesizes the instances of ``cdk.json`` in-process (offline, as ``make
synth`` does), walks each template and prices it with infra/prices.py
(infra/cost.py), at the instance's declared ``expected_load`` and trigger
interval. ``--live`` reads the EC2 and EMR instance-hour prices from the AWS
Price List API instead (scripts/cost_live.py; needs credentials).

Exit codes: 0 printed, 2 bad arguments or cdk.json, 5 the Price List API failed.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from infra.config import SYNTH_CHECK_CONTEXT_KEY, read_cdk_context
from infra.cost import NO_LOAD, NOT_PRICED_NOTE, estimate, load_for, preamble, render
from infra.prices import PRICE_ROWS, PriceRow
from infra.shared_config import sharing
from infra.stacks.application import build_app
from infra.stacks.shared_stack import SharedRegionStack
from scripts.command import DEFAULT_CDK_JSON, EXIT_AWS, EXIT_USAGE, OperatorError, run_command
from scripts.cost_live import PRICING_REGION, live_rows

if TYPE_CHECKING:
    from infra.stacks.streaming_stack import StreamingStack


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make cost", description=__doc__.splitlines()[0])
    parser.add_argument("--cdk-json", type=Path, default=DEFAULT_CDK_JSON)
    parser.add_argument("--instance", help="only this instance (domain-region)")
    parser.add_argument(
        "--live", action="store_true", help="EC2/EMR prices from the AWS Price List API"
    )
    return parser.parse_args(argv)


def report(args: argparse.Namespace) -> str:
    """Every instance's lines (or ``--instance``'s), with the prices' date."""
    try:
        context = {**read_cdk_context(args.cdk_json), SYNTH_CHECK_CONTEXT_KEY: True}
    except (OSError, ValueError) as exc:
        raise OperatorError(EXIT_USAGE, f"{args.cdk_json}: {exc}") from exc
    with tempfile.TemporaryDirectory(prefix="cost-") as outdir:
        try:
            app, stacks = build_app(context, outdir=outdir)
        except ValueError as exc:
            raise OperatorError(EXIT_USAGE, f"{args.cdk_json}: {exc}") from exc
        chosen = [s for s in stacks if args.instance in (None, s.config.instance_id)]
        if not chosen:
            declared = ", ".join(s.config.instance_id for s in stacks)
            raise OperatorError(EXIT_USAGE, f"--instance {args.instance}: declared: {declared}")
        assembly = app.synth()
        rows = _live(chosen) if args.live else PRICE_ROWS
        blocks = []
        for stack in chosen:
            config = stack.config
            load = load_for(config)
            template = assembly.get_stack_by_name(stack.stack_name).template
            found = estimate(stack.stack_name, template, config.region, load, rows)
            blocks.append(
                f"{render(found)}\n  (volume lines at {load.records_per_sec:g} records/s of "
                f"{load.record_bytes} B: expected_load in cdk.json)"
            )
        for shared in [c for c in app.node.children if isinstance(c, SharedRegionStack)]:
            template = assembly.get_stack_by_name(shared.stack_name).template
            found = estimate(shared.stack_name, template, shared.region, NO_LOAD, rows)
            users = [s for s in stacks if sharing(s.config, shared.config)]
            if args.instance is not None and not any(u in chosen for u in users):
                continue
            share = found.total_usd / len(users) if users else found.total_usd
            blocks.append(
                f"{render(found)}\n  (shared by {len(users)} instance(s) of {shared.region}: "
                f"{', '.join(s.config.instance_id for s in users) or 'none yet'}; "
                f"${share:,.2f} each)"
            )
    live = [r for r in rows if r.note == "live"]
    source = f" {len(live)} rows read live from the AWS Price List API." if args.live else ""
    return "\n\n".join([preamble(NOT_PRICED_NOTE + source), *blocks])


def _live(stacks: Sequence[StreamingStack]) -> tuple[PriceRow, ...]:
    regions = {stack.config.region for stack in stacks}
    try:
        client = boto3.client("pricing", region_name=PRICING_REGION)
        return live_rows(client, PRICE_ROWS, regions)
    except (BotoCoreError, ClientError) as exc:
        raise OperatorError(EXIT_AWS, f"AWS Price List API: {exc}") from exc


def main(argv: Sequence[str] | None = None) -> int:
    def run() -> int:
        print(report(parse_args(argv)))
        return 0

    return run_command("make cost", run)


if __name__ == "__main__":
    raise SystemExit(main())
