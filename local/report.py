"""The run report: one HTML page and its PNG charts, drawn from a metrics dump.

``make run`` renders it into ``<work dir>/report/`` and ``python -m
local.report_cli`` renders any dump (and checkpoint) the same way. Per instance:
the run's figures in a table, failures by reason in a table, and five charts
(batch duration vs trigger interval, end-to-end latency, source lag, input vs
processed rate, failures by reason). Each chart's alt text carries the
numbers it shows, so the page reads without the images too.

The charts are PNG files next to ``index.html``, linked by relative paths: the
directory moves as one unit, each chart can be pasted on its own into an
incident or a ticket, and the page stays small, greppable text (base64 data
URIs would make a single file but a 100 KB-per-chart one that no one can grep).

The numbers come from :mod:`local.report_data` (pure); this module only
draws (matplotlib, Agg backend: no display needed) and writes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator, StrMethodFormatter

from local.metrics_dump import InstanceRun, RunDump
from local.report_data import (
    Figures,
    Series,
    batch_durations,
    end_to_end_latency,
    failures_by_reason,
    figures,
    input_rate,
    processed_rate,
    source_lag,
)
from model import contract

INDEX: Final = "index.html"
FIG_SIZE: Final = (8.0, 3.6)
DPI: Final = 100
TRIGGER_COLOR: Final = "#c44e52"
COLORS: Final = ("#4c72b0", "#dd8452", "#55a868", "#8172b3")


def _n(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return f"{value:,.0f}{' ' + unit if unit else ''}"


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


@dataclass(frozen=True)
class Chart:
    slug: str
    title: str
    alt: str
    draw: Callable[[Any], None]
    note: str = ""


def _no_data(ax: Any, why: str) -> None:
    ax.text(0.5, 0.5, f"no data\n{why}", ha="center", va="center", wrap=True, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])


def _line(ax: Any, series: Series, color: str, marker: str = "o") -> None:
    ax.plot(series.x, series.y, marker=marker, markersize=4, color=color, label=series.label)


def _hline(ax: Any, value: float, label: str, color: str = TRIGGER_COLOR) -> None:
    ax.axhline(value, color=color, linestyle="--", linewidth=1.2, label=label)


def _time_axis(ax: Any, unit: str, run: InstanceRun) -> None:
    """Every time chart spans the whole run, so the charts line up."""
    ax.set_xlim(0, max(1.0, (run.end - run.start).total_seconds()))
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")


def batch_chart(run: InstanceRun, fig: Figures) -> Chart:
    series = batch_durations(run)
    alt = (
        f"Batch duration vs trigger interval, {run.instance}: "
        f"{_count(fig.batches_measured, 'batch', 'batches')} measured, "
        f"p50 {_n(fig.batch_p50_ms, 'ms')}, "
        f"max {_n(fig.batch_max_ms, 'ms')}, trigger {_n(fig.trigger_ms, 'ms')}, "
        f"{fig.over_trigger:,} slower than the trigger"
    )

    def draw(ax: Any) -> None:
        if not series:
            _no_data(ax, f"no {contract.BATCH_DURATION_MS} published")
            return
        # Each bar spans the batch's run: it ends when its metrics were
        # published, and is as wide as it took (seconds) and as tall (ms).
        colors = [TRIGGER_COLOR if v > fig.trigger_ms else COLORS[0] for v in series.y]
        widths = [max(v / 1000.0, 0.3) for v in series.y]
        starts = [x - w for x, w in zip(series.x, widths, strict=True)]
        ax.bar(
            starts,
            series.y,
            width=widths,
            align="edge",
            color=colors,
            edgecolor="white",
            label=f"{series.label}; red: slower than the trigger",
        )
        _hline(ax, fig.trigger_ms, f"trigger interval ({_n(fig.trigger_ms, 'ms')})")
        _time_axis(ax, "ms", run)

    return Chart("batch-duration", "Batch duration vs trigger interval", alt, draw)


def latency_chart(run: InstanceRun, fig: Figures) -> Chart:
    series = end_to_end_latency(run)
    alarm = run.thresholds.get(contract.END_TO_END_LATENCY_MS)
    alt = (
        f"End-to-end latency, {run.instance}: max {_n(fig.latency_max_ms, 'ms')} over "
        f"{_count(len(series.y), 'batch', 'batches')} with records"
        + (f", alarm at {_n(alarm, 'ms')}" if alarm is not None else "")
    )

    def draw(ax: Any) -> None:
        if not series:
            _no_data(ax, f"no {contract.END_TO_END_LATENCY_MS} published (no batch had records)")
            return
        _line(ax, series, COLORS[0])
        if alarm is not None and alarm <= 2 * (series.peak or 0):
            _hline(ax, alarm, f"alarm ({_n(alarm, 'ms')})")
        _time_axis(ax, "ms", run)

    return Chart("latency", "End-to-end latency (oldest record of each batch)", alt, draw)


def lag_chart(run: InstanceRun, fig: Figures) -> Chart:
    lag = source_lag(run)
    if lag.origin == "checkpoint":
        alt = (
            f"Source lag, {run.instance} (derived from the checkpoint): at most "
            f"{_n(fig.lag_max_records)} records waiting, the oldest for {_n(fig.lag_max_ms, 'ms')}"
        )
    elif lag.origin == "metric":
        alt = (
            f"Source lag, {run.instance} ({contract.SOURCE_LAG_MS}): max {_n(fig.lag_max_ms, 'ms')}"
        )
    else:
        alt = f"Source lag, {run.instance}: no data; {lag.note}"

    def draw(ax: Any) -> None:
        if lag.origin == "none":
            _no_data(ax, lag.note)
            return
        _line(ax, lag.age, COLORS[0])
        _time_axis(ax, "ms", run)
        if lag.records:
            right = ax.twinx()
            right.bar(lag.records.x, lag.records.y, width=0.8, alpha=0.3, color=COLORS[1])
            right.set_ylabel("records waiting (bars)", color=COLORS[1])
            right.set_ylim(bottom=0)
            right.yaxis.set_major_locator(MaxNLocator(integer=True))

    origin = {"checkpoint": "derived from the checkpoint", "metric": contract.SOURCE_LAG_MS}
    title = f"Source lag ({origin.get(lag.origin, 'no data')})"
    return Chart("source-lag", title, alt, draw, lag.note)


def rate_chart(run: InstanceRun, fig: Figures) -> Chart:
    into, done = input_rate(run), processed_rate(run)
    alt = (
        f"Input vs processed rate, {run.instance}: input max {_n(fig.input_rate_max, 'rows/s')}, "
        f"processed max {_n(fig.processed_rate_max, 'rows/s')}, "
        f"{fig.input_rows:,} input rows in all"
    )

    def draw(ax: Any) -> None:
        if not into and not done:
            _no_data(ax, f"no {contract.INPUT_ROWS_PER_SECOND} published")
            return
        _line(ax, into, COLORS[0])
        _line(ax, done, COLORS[2], marker="s")
        _time_axis(ax, "rows/s", run)

    return Chart("rates", "Input vs processed rate", alt, draw)


def failures_chart(run: InstanceRun, fig: Figures) -> Chart:
    reasons = failures_by_reason(run)
    origin = "failure topic" if run.failures_by_reason is not None else "FailureRecords metric"
    listed = ", ".join(f"{k}={v:,}" for k, v in reasons.items()) or "none"
    alt = f"Failures by reason, {run.instance} ({origin}): {listed}; total {fig.failures_total:,}"

    def draw(ax: Any) -> None:
        if not reasons:
            _no_data(ax, "no failure records")
            return
        names = list(reasons)
        bars = ax.barh(names, [reasons[n] for n in names], color=COLORS[1])
        ax.bar_label(bars, fmt="%d", fontsize=8, padding=2)
        ax.invert_yaxis()
        ax.set_xlabel("failure records (distinct keys)")
        ax.grid(axis="x", alpha=0.3)

    return Chart("failures", f"Failures by reason ({origin})", alt, draw)


CHARTS: Final = (batch_chart, latency_chart, lag_chart, rate_chart, failures_chart)


def _file_name(instance: str, slug: str) -> str:
    return f"{re.sub(r'[^A-Za-z0-9_.-]', '_', instance)}-{slug}.png"


def _save(chart: Chart, path: Path) -> None:
    matplotlib.use("Agg")

    fig, ax = plt.subplots(figsize=FIG_SIZE)
    try:
        chart.draw(ax)
        ax.set_title(chart.title, fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)


def _figure_rows(run: InstanceRun, fig: Figures) -> list[tuple[str, str]]:
    lag_records = "" if fig.lag_max_records is None else f", {fig.lag_max_records:,} records"
    rows = [
        (
            "batches committed (checkpoint)",
            _n(fig.batches_committed) if fig.batches_committed is not None else "no checkpoint",
        ),
        (f"batches measured ({contract.BATCH_DURATION_MS} data points)", _n(fig.batches_measured)),
        ("trigger interval", _n(fig.trigger_ms, "ms")),
        ("batch duration p50", _n(fig.batch_p50_ms, "ms")),
        ("batch duration max", _n(fig.batch_max_ms, "ms")),
        ("batches slower than the trigger", _n(fig.over_trigger)),
        ("end-to-end latency max", _n(fig.latency_max_ms, "ms")),
        (f"source lag max ({fig.lag_origin})", _n(fig.lag_max_ms, "ms") + lag_records),
        (f"input rows ({contract.INPUT_ROWS})", _n(fig.input_rows)),
        ("input rate max", _n(fig.input_rate_max, "rows/s")),
        ("processed rate max", _n(fig.processed_rate_max, "rows/s")),
        (f"failure records ({contract.FAILURE_RECORDS} metric)", _n(fig.failure_records_metric)),
        (
            "window",
            f"{run.start.isoformat(timespec='seconds')} to {run.end.isoformat(timespec='seconds')}"
            f" (period {run.period_sec} s)",
        ),
    ]
    return rows


def _table(rows: Sequence[tuple[str, str]], css: str, head: tuple[str, str]) -> str:
    body = "".join(
        f"<tr><td>{html.escape(k)}</td><td class='num'>{html.escape(v)}</td></tr>" for k, v in rows
    )
    return (
        f"<table class='{css}'><tr><th>{html.escape(head[0])}</th>"
        f"<th>{html.escape(head[1])}</th></tr>{body}</table>"
    )


def _instance_section(run: InstanceRun, out_dir: Path) -> str:
    fig = figures(run)
    parts = [f"<section id='{html.escape(run.instance)}'><h2>{html.escape(run.instance)}</h2>"]
    if run.summary:
        parts.append(f"<pre class='summary'>{html.escape(chr(10).join(run.summary))}</pre>")
    parts.append(_table(_figure_rows(run, fig), "figures", ("figure", "value")))
    reasons = [(k, f"{v:,}") for k, v in fig.failures_by_reason.items()]
    parts.append(
        _table([*reasons, ("total", f"{fig.failures_total:,}")], "reasons", ("reason", "records"))
    )
    for make in CHARTS:
        chart = make(run, fig)
        name = _file_name(run.instance, chart.slug)
        _save(chart, out_dir / name)
        parts.append(
            f"<figure><img src='{html.escape(name)}' alt='{html.escape(chart.alt, quote=True)}'>"
            f"<figcaption>{html.escape(chart.alt)}"
            + (f"<br>{html.escape(chart.note)}" if chart.note else "")
            + "</figcaption></figure>"
        )
    parts.append("</section>")
    return "\n".join(parts)


_STYLE: Final = """
body{font-family:sans-serif;max-width:60rem;margin:1rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1rem}
td,th{border:1px solid #ccc;padding:.2rem .6rem;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
pre.summary{background:#f6f6f6;padding:.5rem;overflow-x:auto;font-size:.8rem}
figure{margin:1rem 0}img{max-width:100%}figcaption{font-size:.8rem;color:#555}
"""


def render(dump: RunDump, out_dir: Path, *, source: str = "") -> Path:
    """Write ``index.html`` and the charts into ``out_dir``; return the page's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    sections = [_instance_section(run, out_dir) for run in dump.runs]
    toc = "".join(
        f"<li><a href='#{html.escape(i)}'>{html.escape(i)}</a></li>" for i in dump.instances()
    )
    page = (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>Run report: {html.escape(', '.join(dump.instances()))}</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>Run report</h1><p>Generated {generated}"
        + (f" from {html.escape(source)}" if source else "")
        + f".</p><ul>{toc}</ul>"
        + "\n".join(sections)
        + "</body></html>\n"
    )
    path = out_dir / INDEX
    path.write_text(page, encoding="utf-8")
    return path
