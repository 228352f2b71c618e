"""``make bench-report`` (``python -m bench.report [--results DIR] [--out PATH]
[--check]``): docs/benchmarks.md, generated from ``bench/results/*.json``.

The figures a document states are the figures the benchmarks recorded: the
page is written from the JSON files ``make bench`` leaves, never by hand, so
it cannot drift from them (tests/bench/test_report.py regenerates it and
fails when the committed page differs). Per benchmark: its figures, bars and
verdicts (bench/report_rows.py), when and on what it was measured (the
machine facts, the machine's load and the code version the JSON records), its
chart, and how it is measured (the ``what`` the benchmark wrote). ``--check``
writes nothing and exits 1 when the page is not what the results give.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from bench.framework import RESULTS, Row
from bench.report_rows import KNOWN, rows_for

ROOT: Final = Path(__file__).resolve().parents[1]
DOC: Final = ROOT / "docs" / "benchmarks.md"
# Charts are linked from docs/, wherever the page is written to.
CHART_LINK: Final = "../bench/results"
COMMAND: Final = "make bench-report"

INTRO: Final = """\
`make bench` (`python -m bench [names] [--quick] [--out-dir DIR]`) runs the
benchmarks. Each measures a baseline in the same run, so a speed is stated as
a ratio to something measured side by side; each figure is repeated (3 times
unless the table says otherwise) and reported as min and median. Each writes
`bench/results/<name>.json` (its figures, how they were measured, the machine
and, for the newer ones, the code version and the machine's load) and a PNG
chart beside it; `tests/bench` runs them with `--quick`. This machine is
shared with other work: ratios are measured side by side and hold, absolute
times depend on the load each section records. Sizing from these figures:
[`sizing.md`](sizing.md).
"""


def read_result(path: Path) -> dict[str, Any]:
    """One saved result. A file that is not a JSON object is kept as a result
    that says so, rather than stopping the page or the run's table."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        body = {"benchmark": path.stem, "unreadable": f"{type(exc).__name__}: {exc}"}
    if not isinstance(body, dict):
        body = {"benchmark": path.stem, "unreadable": "not a JSON object"}
    body.setdefault("benchmark", path.stem)
    return body


def load_results(results: Path) -> list[dict[str, Any]]:
    """Every ``*.json`` of ``results``: known benchmarks in their run order,
    then the others by name."""
    found = [read_result(path) for path in sorted(results.glob("*.json"))]
    order = list(KNOWN)
    return sorted(
        found,
        key=lambda r: (
            (order.index(r["benchmark"]), "")
            if r["benchmark"] in order
            else (len(order), str(r["benchmark"]))
        ),
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _verdict(row: Row) -> str:
    return row.verdict or ""


def _table(rows: Sequence[Row]) -> list[str]:
    lines = ["| figure | value | bar | verdict |", "|---|---|---|---|"]
    lines += [
        f"| {_cell(r.figure)} | {_cell(r.value)} | {_cell(r.bar)} | {_verdict(r)} |" for r in rows
    ]
    return lines


def _code(result: dict[str, Any]) -> str:
    code = result.get("code")
    if not isinstance(code, dict) or "commit" not in code:
        return "not recorded"
    changed = code.get("job_files_changed_since_commit") or []
    since = f"changed since: {', '.join(map(str, changed))}" if changed else "no job file changed"
    return f"commit `{code['commit']}` ({since})"


def _load(value: Any) -> str:
    if isinstance(value, dict) and "load_average_1_5_15_min" in value:
        averages = ", ".join(str(a) for a in value["load_average_1_5_15_min"])
        others = ", ".join(
            f"{k.removesuffix('_processes')} {v}"
            for k, v in value.items()
            if k.endswith("_processes")
        )
        cores = value.get("cores", "?")
        return f"load {averages} (1/5/15 min) on {cores} cores; other processes: {others}"
    if isinstance(value, dict):
        return "; ".join(f"{key}: {_load(item)}" for key, item in value.items())
    return str(value)


def _facts(result: dict[str, Any]) -> list[str]:
    machine = result.get("machine")
    facts = [
        f"- Measured {result.get('measured_at', 'at an unrecorded time')}, "
        f"{result.get('mode', '?')} run, {result.get('repeats', '?')} repeats; "
        f"code: {_code(result)}.",
    ]
    if isinstance(machine, dict):
        facts.append("- Machine: " + "; ".join(f"{k} {v}" for k, v in machine.items()) + ".")
    else:
        facts.append("- Machine: not recorded.")
    facts += [
        f"- {key.replace('_', ' ').capitalize()}: {_load(value)}."
        for key, value in result.items()
        if key.startswith("load")
    ]
    return facts


def _what(result: dict[str, Any]) -> tuple[str, str]:
    """The benchmark's own description: its first paragraph, and the rest."""
    text = str(result.get("what", "")).strip()
    first, _, rest = text.partition("\n\n")
    return " ".join(first.split()), rest.strip()


def section(result: dict[str, Any], results: Path) -> list[str]:
    name = str(result["benchmark"])
    lines = [f"## {name}", ""]
    summary, details = _what(result)
    if summary:
        lines += [summary, ""]
    if "unreadable" in result:
        return [
            *lines,
            f"`bench/results/{name}.json` could not be read: {result['unreadable']}.",
            "",
        ]
    rows, fallback = rows_for(result)
    if fallback is not None:
        lines += [f"Shown as recorded, key by key: {fallback}.", ""]
    lines += [*_table(rows), "", *_facts(result), ""]
    chart = result.get("chart")
    if isinstance(chart, str) and (results / chart).is_file():
        lines += [f"![{name}]({CHART_LINK}/{chart})", ""]
    if details:
        lines += [
            "<details><summary>How it is measured</summary>",
            "",
            details,
            "",
            "</details>",
            "",
        ]
    return lines


def overview(found: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| benchmark | what | measured | Spark | code | bars met |",
        "|---|---|---|---|---|---|",
    ]
    for result in found:
        rows, _ = rows_for(result) if "unreadable" not in result else ([], None)
        judged = [r for r in rows if r.met is not None]
        met = sum(1 for r in judged if r.met)
        recorded = result.get("machine")
        machine: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
        name = result["benchmark"]
        lines.append(
            f"| [{name}](#{name}) | {_cell(_what(result)[0])} | {result.get('measured_at', '?')} | "
            f"{machine.get('pyspark', '?')} | {_cell(_code(result))} | "
            + (f"{met} of {len(judged)}" if judged else "no bar")
            + " |"
        )
    return lines


def render(results: Path) -> str:
    """The whole page for the results in ``results``."""
    found = load_results(results)
    lines = [
        "# Benchmarks",
        "",
        f"<!-- Generated by `{COMMAND}` from bench/results/*.json: do not edit by hand. -->",
        "",
        f"Generated by `{COMMAND}` (`python -m bench.report`) from `bench/results/*.json`;",
        "do not edit it by hand: `tests/bench/test_report.py` fails when it differs from",
        "what the results give, so whoever re-runs a benchmark regenerates it.",
        "",
        INTRO,
        *overview(found),
        "",
    ]
    for result in found:
        lines += section(result, results)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.report", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--results", type=Path, default=RESULTS, help="where the JSON results are")
    parser.add_argument("--out", type=Path, default=DOC, help="the page to write")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if the page differs"
    )
    args = parser.parse_args(argv)
    page = render(args.results)
    current = args.out.read_text(encoding="utf-8") if args.out.is_file() else None
    if args.check:
        if current != page:
            print(f"{args.out} is not what {args.results} gives: run {COMMAND}", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page, encoding="utf-8")
    print(f"wrote {args.out} from {len(load_results(args.results))} results in {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
