"""What an instance costs a month (``make cost``, and a line per instance at
``cdk synth``): the estimate of a synthesized template under the instance's
declared load, its report and its one-line summary.

The lines themselves, one per billed resource or volume, come from walking
the template (:mod:`infra.cost.lines`, which says what is priced and how).
Free tiers (the account's first 10 alarms, 3 dashboards, 1 M catalog
requests) are not subtracted: they are the account's, not the instance's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from infra.advice import advice_line
from infra.config import InstanceConfig
from infra.cost.lines import CostLine, Load, TemplateCostError, priced_lines
from infra.cost.prices import (
    FIRST_READ,
    HOURS_PER_MONTH,
    PRICE_ROWS,
    PRICES_READ,
    PriceRow,
    UnknownPriceError,
)
from model.record import REASONS


@dataclass(frozen=True)
class Estimate:
    stack: str
    region: str
    load: Load
    lines: tuple[CostLine, ...]
    prices_read: str = PRICES_READ

    @property
    def total_usd(self) -> float:
        """The priced lines' sum (:attr:`unpriced` says what it lacks)."""
        return sum(line.monthly_usd for line in self.lines)

    @property
    def unpriced(self) -> tuple[CostLine, ...]:
        return tuple(line for line in self.lines if not line.priced)


def estimate(
    stack: str,
    template: Mapping[str, Any],
    region: str,
    load: Load,
    rows: tuple[PriceRow, ...] = PRICE_ROWS,
) -> Estimate:
    """Every billed line of ``template`` deployed in ``region`` under ``load``."""
    return Estimate(
        stack, region, load, priced_lines(template, region, load, stack=stack, rows=rows)
    )


# --------------------------------------------------------------------------- output


def render(estimate_: Estimate) -> str:
    """The lines of one instance: resource, count, unit price, monthly."""
    head = f"{estimate_.stack} ({estimate_.region})"
    width = max(len(line.resource) for line in estimate_.lines) + 2
    out = [head, f"  {'resource':<{width}}{'count':>14}  {'unit price':<28}{'monthly':>11}"]
    for line in estimate_.lines:
        if not line.priced:
            out.append(f"  {line.resource:<{width}}{line.count:>14,.2f}  {line.note}")
            continue
        unit = f"${line.unit_usd:g} / {line.unit}"
        out.append(
            f"  {line.resource:<{width}}{line.count:>14,.2f}  {unit:<28}"
            f"{_usd(line.monthly_usd):>11}"
        )
    missing = len(estimate_.unpriced)
    total = f"total a month{f' ({missing} lines not priced)' if missing else ''}"
    out.append(f"  {total:<{width}}{'':>14}  {'':<28}{_usd(estimate_.total_usd):>11}")
    return "\n".join(out)


def preamble(load_note: str) -> str:
    return (
        f"Monthly estimate ({HOURS_PER_MONTH} h), AWS on-demand LIST prices read "
        f"{FIRST_READ} to {PRICES_READ} (infra/cost/prices.py; each row cites its pricing page "
        "and date). "
        f"No discounts, free tiers, data transfer or taxes. {load_note}"
    )


def summary(estimate_: Estimate) -> str:
    """The one line ``cdk synth`` prints per instance (on stderr)."""
    rate = estimate_.load.records_per_sec
    load = f"at {rate:g} records/s" if rate else "with no declared load"
    return (
        f"cost: {estimate_.stack} ~{_usd(estimate_.total_usd)}/month {load} (list prices of "
        f"{estimate_.prices_read}; `make cost` for the lines)"
    )


def _usd(value: float) -> str:
    return f"${value:,.2f}"


def load_for(config: InstanceConfig) -> Load:
    """An instance's declared ``expected_load`` at its ``job.trigger_interval_sec``."""
    expected = config.expected_load
    return Load(
        expected.records_per_sec,
        expected.record_bytes,
        config.job.trigger_interval_sec,
        enhanced_fan_out=config.job.source.consumer_type == "SubscribeToShard",
    )


def synth_line(config: InstanceConfig, stack: str, template: Mapping[str, Any]) -> str:
    """What ``cdk synth`` prints (stderr) for one instance: its cost line, and
    the advice line when its shape is far from its declared load's need
    (infra/advice.py)."""
    line = synth_line_at(stack, config.region, load_for(config), template)
    advice = advice_line(config)
    return line if advice is None else f"{line}\n{advice}"


def synth_line_at(stack: str, region: str, load: Load, template: Mapping[str, Any]) -> str:
    """The ``cdk synth`` line of any stack. One the table cannot price (a
    region without rows) gets the reason, never a failed synth: the estimate
    informs the deploy, it does not gate it."""
    try:
        return summary(estimate(stack, template, region, load))
    except (TemplateCostError, UnknownPriceError) as exc:
        return f"cost: {stack} not estimated: {exc.args[0]}"


# A stack that runs no job (a region's shared stack) carries no volume.
NO_LOAD: Final = Load(0, 1024, 1)


NOT_PRICED_NOTE: Final = (
    "Not priced: Glue table optimizers (DPU-hours of compaction work done), data "
    "transfer, CloudWatch Logs ingestion, the NAT's processing of S3 and Glue traffic "
    "(S3 goes through the VPC's gateway endpoint), the job's failure counts per "
    f"reason (up to {len(REASONS)} custom metrics, each billed only for the hours "
    "its reason occurs)."
)
