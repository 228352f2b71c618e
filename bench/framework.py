"""What every benchmark shares: the run context, repeats, machine facts, results, charts.

Conventions, so that a figure holds on a shared machine: each figure is
measured at least 3 times and reported as min and median; a speed is only
ever stated as a ratio to a baseline measured in the same run; each
benchmark writes ``<out>/<name>.json`` (figures, how they were measured,
machine facts, versions) and ``<out>/<name>.png``. The rows of the one
table printed at the end, like those of docs/benchmarks.md, are built from
that JSON by ``bench.report_rows``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import matplotlib
import matplotlib.pyplot as plt
import psutil  # type: ignore[import-untyped]

from job.session import build_session
from local.emulators import running_emulators
from model.spark_conf import local_conf
from producer.local_run import FAKE_CREDENTIALS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from local.emulators import Emulators

RESULTS: Final = Path(__file__).resolve().parent / "results"
# The region every benchmark names to the emulated AWS: its job config, its
# clients and the SDK default of the Spark session.
REGION: Final = "us-east-1"
REPEATS: Final = 3
# Untimed runs of a whole micro-batch (each side) before the timed repeats. The
# job is long-running: its batches run on a JVM whose hot code the JIT has
# compiled. On this 2-core machine the batch of 200,000 records reaches that
# state after about 3 runs (measured: 8.5, 7.6, 6.3, 5.6, 5.7, 4.8 s for
# runs 2-7 of one JVM); one warm-up run left the first timed repeats 1.5x
# slower than the later ones. Both sides of a comparison get the same count.
WARMUP_BATCHES: Final = 3


@dataclass(frozen=True)
class Row:
    """One line of the final table."""

    benchmark: str
    figure: str
    value: str
    bar: str = ""
    met: bool | None = None

    @property
    def verdict(self) -> str:
        return "" if self.met is None else ("met" if self.met else "MISSED")


@dataclass
class Context:
    """One ``python -m bench`` run: options, a scratch directory, and the
    expensive things (one SparkSession, one pair of emulators) started once,
    on first use, and stopped at the end of the run."""

    quick: bool
    out_dir: Path
    repeats: int = REPEATS
    # growth's pre-fill commits (None: the benchmark's own default).
    growth_commits: int | None = None
    shared: dict[str, Any] = field(default_factory=dict)
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _scratch: Path | None = None
    _spark: SparkSession | None = None
    _emulators: Emulators | None = None

    def scratch(self, prefix: str) -> Path:
        """A fresh directory under the run's scratch root (deleted at the end)."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="bench-"))
            self._stack.callback(shutil.rmtree, self._scratch, True)
        return Path(tempfile.mkdtemp(prefix=f"{prefix}-", dir=self._scratch))

    def __post_init__(self) -> None:
        # Before any JVM starts: Spark's Python workers inherit the JVM's
        # environment, fixed when the session starts, not this process's later one.
        os.environ.update(FAKE_CREDENTIALS)
        os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    @property
    def timed_rounds(self) -> int:
        """How many times a benchmark repeats its timed work: the run's
        ``--repeats``; once under ``--quick``, whose figures only show that the
        benchmark runs."""
        return 1 if self.quick else self.repeats

    @property
    def emulators(self) -> Emulators:
        if self._emulators is None:
            self._emulators = self._stack.enter_context(running_emulators())
        return self._emulators

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            work = self.scratch("spark")
            conf = local_conf(str(work))
            # Progress events of every trigger, idle ones included, and enough
            # of them kept for a whole benchmark (read from recentProgress).
            conf["spark.sql.streaming.numRecentProgressUpdates"] = "100000"
            session = build_session(conf, "bench")
            session.sparkContext.setLogLevel("ERROR")
            self._stack.callback(session.stop)
            self._spark = session
        return self._spark

    def close(self) -> None:
        self._stack.close()


def summary(samples: Sequence[float], digits: int = 3) -> dict[str, Any]:
    """min and median of a figure's repeats, and the repeats themselves."""
    return {
        "min": round(min(samples), digits),
        "median": round(statistics.median(samples), digits),
        "runs": [round(s, digits) for s in samples],
    }


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def _command_line(args: Sequence[str]) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def _git_output(root: Path, *args: str) -> str:
    """git's stdout, or "" when git is missing or the tree is no checkout."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def _cpu_model() -> str:
    for line in _command_line(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def machine_facts() -> dict[str, Any]:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    java = _command_line(["java", "-version"]).splitlines()
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1),
        "cpu_model": _cpu_model(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": java[0] if java else "unknown",
        "pyspark": _version("pyspark"),
        "pyiceberg": _version("pyiceberg"),
        "pyarrow": _version("pyarrow"),
        "spark_master": "local[2]",
        "note": "a shared machine: other processes may have run during the measurement",
    }


def write_result(ctx: Context, name: str, result: dict[str, Any]) -> Path:
    """``<out>/<name>.json`` with the run's date, mode and machine facts."""
    ctx.out_dir.mkdir(parents=True, exist_ok=True)
    body = {
        "benchmark": name,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "mode": "quick" if ctx.quick else "full",
        "repeats": ctx.repeats,
        **result,
        "chart": f"{name}.png",
        "machine": machine_facts(),
    }
    path = ctx.out_dir / f"{name}.json"
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    return path


@contextlib.contextmanager
def figure(ctx: Context, name: str, ncols: int = 1, width: float = 6.0) -> Iterator[Any]:
    """A matplotlib figure saved to ``<out>/<name>.png`` when the block ends."""
    matplotlib.use("Agg")

    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, 4.2), squeeze=False)
    try:
        yield fig, list(axes[0])
        fig.tight_layout()
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        fig.savefig(ctx.out_dir / f"{name}.png", dpi=110)
    finally:
        plt.close(fig)


def bars(ax: Any, labels: Sequence[str], values: Sequence[float], title: str, unit: str) -> None:
    """A labelled bar chart on ``ax``."""
    positions = range(len(labels))
    drawn = ax.bar(positions, values, color=["#4c72b0", "#dd8452", "#55a868", "#c44e52"][:1])
    ax.set_xticks(list(positions), labels, rotation=15, ha="right", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(unit)
    ax.bar_label(drawn, fmt="%.2f", fontsize=8)


def print_table(rows: Sequence[Row]) -> None:
    headers = ("benchmark", "figure", "value", "bar", "")
    table = [headers, *((r.benchmark, r.figure, r.value, r.bar, r.verdict) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(headers))]
    for index, line in enumerate(table):
        print("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
        if index == 0:
            print("  ".join("-" * w for w in widths))


# --- helpers added for incident, latency and scale ------------------------------------------


def machine_load() -> dict[str, Any]:
    """How busy the shared machine was around a measurement: the 1/5/15-minute
    load averages and the other JVMs and Python processes running (the other
    agents' Spark sessions and tests), so a slow figure can be read against it."""
    load1, load5, load15 = os.getloadavg()
    others = {"java": 0, "python": 0}
    me = os.getpid()
    for process in psutil.process_iter(["name", "pid"]):
        name = (process.info.get("name") or "").lower()
        if process.info.get("pid") == me:
            continue
        for kind in others:
            if name.startswith(kind):
                others[kind] += 1
    return {
        "load_average_1_5_15_min": [round(load1, 2), round(load5, 2), round(load15, 2)],
        "cores": os.cpu_count(),
        "java_processes": others["java"],
        "python_processes": others["python"],
    }


def code_version() -> dict[str, Any]:
    """The commit measured, and the job's files that differed from it (other
    work in progress in the same tree changes what a figure means). Outside
    a git checkout (an unpacked archive) both are unknown, not git's error."""
    root = Path(__file__).resolve().parents[1]
    head = _git_output(root, "rev-parse", "--short", "HEAD").strip()
    changed = _git_output(root, "status", "--porcelain", "--", "job", "model")
    return {
        "commit": head or "unknown",
        "job_files_changed_since_commit": sorted(
            line[3:] for line in changed.splitlines() if line.strip()
        ),
    }
