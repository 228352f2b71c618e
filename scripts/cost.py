"""``make cost``: what each declared instance costs a month, before deploy.

Synthesizes the instances of ``cdk.json`` in-process (offline, as ``make
synth`` does), walks each template and prices it with infra/cost/prices.py
(infra/cost/estimate.py), at the instance's declared ``expected_load`` and trigger
interval. ``--live`` reads every unit price from the AWS Price List API
instead, in any Region (infra/cost/live.py; needs credentials); a line it
cannot price says so.

Exit codes: 0 printed, 2 bad arguments or cdk.json, 5 the Price List API failed.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from infra.advice import advice_line, advised, demand_of
from infra.config import (
    SELECTION_CONTEXT_KEY,
    SYNTH_CHECK_CONTEXT_KEY,
    InstanceConfig,
    load_instances,
    read_cdk_context,
)
from infra.cost.estimate import (
    NO_LOAD,
    NOT_PRICED_NOTE,
    Estimate,
    estimate,
    load_for,
    preamble,
    render,
)
from infra.cost.lines import Load, TemplateCostError
from infra.cost.live import PRICING_REGION, live_rows
from infra.cost.prices import PRICE_ROWS, PriceRow, UnknownPriceError
from infra.shared_config import sharing
from infra.stacks.application import build_app
from infra.stacks.shared_stack import SharedRegionStack
from scripts.command import DEFAULT_CDK_JSON, EXIT_AWS, EXIT_USAGE, OperatorError, run_command


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="make cost", description=__doc__.splitlines()[0])
    parser.add_argument("--cdk-json", type=Path, default=DEFAULT_CDK_JSON)
    parser.add_argument("--instance", help="only this instance (domain-region)")
    parser.add_argument(
        "--live", action="store_true", help="every price from the AWS Price List API"
    )
    return parser.parse_args(argv)


def report(args: argparse.Namespace) -> str:
    """Every instance's lines (or ``--instance``'s), with the prices' date."""
    try:
        context = {**read_cdk_context(args.cdk_json), SYNTH_CHECK_CONTEXT_KEY: True}
        declared = load_instances(context)
    except (OSError, ValueError) as exc:
        raise OperatorError(EXIT_USAGE, f"{args.cdk_json}: {exc}") from exc
    if args.instance is not None:
        ids = [c.instance_id for c in declared]
        if args.instance not in ids:
            raise OperatorError(
                EXIT_USAGE, f"--instance {args.instance}: declared: {', '.join(ids)}"
            )
        # Only that instance and its region's shared stack are built and priced
        # (the selection cdk deploy uses, infra/stacks/application.py).
        context[SELECTION_CONTEXT_KEY] = args.instance
    with tempfile.TemporaryDirectory(prefix="cost-") as outdir:
        try:
            app, stacks = build_app(context, outdir=outdir)
        except ValueError as exc:
            raise OperatorError(EXIT_USAGE, f"{args.cdk_json}: {exc}") from exc
        assembly = app.synth()
        shared_stacks = [c for c in app.node.children if isinstance(c, SharedRegionStack)]
        regions = {s.config.region for s in stacks} | {s.region for s in shared_stacks}
        rows = _live(regions) if args.live else PRICE_ROWS
        blocks = []
        for stack in stacks:
            config = stack.config
            load = load_for(config)
            template = assembly.get_stack_by_name(stack.stack_name).template
            found = _priced(stack.stack_name, template, config.region, load, rows)
            if "not priced: " in found:
                blocks.append(f"{found}\n{_advice(config, rows)}")
                continue
            blocks.append(
                f"{found}\n  (volume lines at {load.records_per_sec:g} records/s of "
                f"{load.record_bytes} B: expected_load in cdk.json)\n{_advice(config, rows)}"
            )
        for shared in shared_stacks:
            template = assembly.get_stack_by_name(shared.stack_name).template
            users = [c for c in declared if sharing(c, shared.config)]
            names = ", ".join(c.instance_id for c in users) or "none yet"
            try:
                total = estimate(shared.stack_name, template, shared.region, NO_LOAD, rows)
            except (TemplateCostError, UnknownPriceError) as exc:
                blocks.append(_not_priced(shared.stack_name, shared.region, exc))
                continue
            share = total.total_usd / len(users) if users else total.total_usd
            blocks.append(
                f"{render(total)}\n  (shared by {len(users)} instance(s) of {shared.region}: "
                f"{names}; ${share:,.2f} each)"
            )
    live = [r for r in rows if r.note == "live"]
    source = f" {len(live)} rows read live from the AWS Price List API." if args.live else ""
    return "\n\n".join([preamble(NOT_PRICED_NOTE + source), *blocks])


def _advice(config: InstanceConfig, rows: tuple[PriceRow, ...]) -> str:
    """The advised shape beside the instance, on both compute targets, with
    the compute's price a month (infra/advice.py)."""
    demand = demand_of(config)
    if demand is None:
        return "  advice: none (no expected_load declared)"
    lines = [
        f"  advice at {demand.records_per_sec:g} records/s x{demand.headroom:g} headroom "
        f'(expected_load; docs/sizing.md, "The advice"):'
    ]
    for compute, shape in advised(demand, config.region, rows).items():
        usd = "not priced" if shape.monthly_usd is None else f"${shape.monthly_usd:,.2f}/month"
        mark = " (its compute)" if compute == config.compute else ""
        lines.append(f"    {shape.text}: {usd}{mark}")
    flagged = advice_line(config)
    if flagged is not None:
        lines.append(f"  {flagged}")
    return "\n".join(lines)


def _priced(
    stack: str, template: Mapping[str, Any], region: str, load: Load, rows: tuple[PriceRow, ...]
) -> str:
    """The stack's lines, or why it cannot be priced: a region the table has no
    row for is a gap of the estimate, not a reason to hide the others."""
    try:
        found: Estimate = estimate(stack, template, region, load, rows)
    except (TemplateCostError, UnknownPriceError) as exc:
        return _not_priced(stack, region, exc)
    return render(found)


def _not_priced(stack: str, region: str, exc: Exception) -> str:
    return f"{stack} ({region})\n  not priced: {exc.args[0]}"


def _live(regions: set[str]) -> tuple[PriceRow, ...]:
    """Every row of ``regions`` from the Price List API; no credentials or no
    endpoint stops here (exit 5), an answer missing for one price does not."""
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
