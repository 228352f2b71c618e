"""``make bench`` (``python -m bench [NAME ...] [--quick] [--out-dir DIR]``).

Runs the selected benchmarks (all by default) in one process: one
SparkSession and one pair of emulators (moto + tansu) for the whole run,
started on first use. Each benchmark writes ``<out-dir>/<name>.json`` and
``<out-dir>/<name>.png``; one table of every figure is printed at the end,
its rows built from the saved JSON by ``bench.report_rows``, the same rows
``make bench-report`` writes to docs/benchmarks.md.
The exit code is 1 if a benchmark failed to run (a missed bar is a result,
not an error).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import (
    dedup,
    efo,
    growth,
    incident,
    kinesis_source,
    latency,
    latency_efo,
    overhead,
    reader,
    scale,
    serverless_sizing,
    state,
    stop,
    throughput,
)
from bench.framework import REPEATS, RESULTS, Context, Row, print_table
from bench.report import read_result
from bench.report_rows import rows_for


def _benchmarks() -> dict[str, Callable[[Context], None]]:
    # Order matters: growth's 1M-record fill is reused by state when both run.
    return {
        throughput.NAME: throughput.run,
        dedup.NAME: dedup.run,
        growth.NAME: growth.run,
        state.NAME: state.run,
        overhead.NAME: overhead.run,
        kinesis_source.NAME: kinesis_source.run,
        reader.NAME: reader.run,
        incident.NAME: incident.run,
        latency.NAME: latency.run,
        latency_efo.NAME: latency_efo.run,
        efo.NAME: efo.run,
        scale.NAME: scale.run,
        serverless_sizing.NAME: serverless_sizing.run,
        stop.NAME: stop.run,
    }


def _terminate(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    benchmarks = _benchmarks()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run: {', '.join(benchmarks)}"
    )
    parser.add_argument("--quick", action="store_true", help="scaled down (the smoke test's mode)")
    parser.add_argument("--out-dir", type=Path, default=RESULTS, help="where results go")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="repeats per figure (>= 3)")
    parser.add_argument(
        "--growth-commits",
        type=int,
        default=None,
        help="growth: earlier commits before (b) (default 2,000; quick 10)",
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in benchmarks]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(benchmarks)}")
    if args.repeats < REPEATS:
        parser.error(f"--repeats {args.repeats}: at least {REPEATS}")
    selected = args.names or list(benchmarks)
    ctx = Context(
        quick=args.quick,
        out_dir=args.out_dir,
        repeats=args.repeats,
        growth_commits=args.growth_commits,
    )
    # A SIGTERM unwinds like Ctrl-C, so the emulators and Spark are stopped.
    signal.signal(signal.SIGTERM, _terminate)
    rows: list[Row] = []
    failed: list[str] = []
    started = time.monotonic()
    try:
        for name in selected:
            began = time.monotonic()
            print(f"== {name}{' (quick)' if args.quick else ''}", flush=True)
            try:
                benchmarks[name](ctx)
            except Exception:
                traceback.print_exc()
                failed.append(name)
                rows.append(Row(name, "error", "failed to run (traceback above)"))
            else:
                found, fallback = rows_for(read_result(args.out_dir / f"{name}.json"))
                rows.extend(found)
                if fallback is not None:
                    print(f"   {name}: shown key by key: {fallback}", flush=True)
            print(f"== {name}: {time.monotonic() - began:.0f}s", flush=True)
    finally:
        ctx.close()
    print()
    print_table(rows)
    print(f"\nresults in {args.out_dir}; wall time {time.monotonic() - started:.0f}s")
    if failed:
        print(f"failed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
