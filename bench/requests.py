"""``python -m bench.requests``: the AWS requests one micro-batch makes, counted
over a steady run of the real local pipeline, on both targets; writes
``infra/cost/request_counts.json``, which ``make cost`` multiplies.

Per instance (default: the example's EMR instance, then its serverless one
on the StartJobRun launch path), as ``make run`` runs it (local/harness.py):
moto logs every request it answers (``MOTO_REQUEST_LOG``), a producer keeps a
steady rate, the first ``--cold`` batches are left out, then ``strace`` is
attached to the job's whole process tree for ``--batches`` batches (the file
calls that stand for S3 and Glue locally: :mod:`local.request_log`). Counts
are divided by the batches committed in that window.

A benchmark (minutes of Spark), not a CI test: CI checks the arithmetic
(tests/local/test_request_log.py) and that ``make cost`` uses the file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from infra.cost.requests import COUNTS_FILE, Count, TargetCounts, to_json
from local import request_log
from local.efo_endpoint import read_stats
from local.emulators import running_emulators
from local.harness import LocalInstance, load_example_instances, select_instances
from local.job_process import REPO_ROOT
from model.polling import poll_until
from producer import local_run
from producer.events import MixSpec, generate, now_utc

WORK_DIR: Final = REPO_ROOT / ".work" / "requests"
DEFAULT_INSTANCES: Final = ("orders-ap-northeast-2", "payments-ap-northeast-2")
# The file calls that stand for S3 requests (local/request_log.py _file_calls).
TRACED: Final = (
    "open,openat,rename,renameat,renameat2,unlink,unlinkat,rmdir,mkdir,mkdirat,"
    "stat,lstat,newfstatat,statx,access,faccessat,faccessat2"
)
# Requests in moto's log that are not the job's: the producer's puts, and on
# enhanced fan-out the SubscribeToShard front's own polling of moto (on AWS
# that happens inside Kinesis; the job's SubscribeToShard calls are counted
# from the front's stats instead).
PRODUCER_APIS: Final = frozenset({"PutRecord", "PutRecords"})
FRONT_APIS: Final = frozenset({"GetRecords", "GetShardIterator"})
# What a measured instance's run leaves beside its logs: its window and shape.
WINDOW_FILE: Final = "requests-window.json"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.requests", description=__doc__)
    parser.add_argument("--instances", default=",".join(DEFAULT_INSTANCES))
    parser.add_argument("--rate", type=float, default=50.0, help="records/s produced")
    parser.add_argument("--cold", type=int, default=3, help="first batches left out")
    parser.add_argument("--batches", type=int, default=15, help="batches counted")
    parser.add_argument("--trigger-interval-sec", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=COUNTS_FILE)
    parser.add_argument(
        "--analyse-only",
        action="store_true",
        help="count again from the logs the last run left in .work/requests",
    )
    return parser.parse_args(argv)


def process_tree(root: int) -> list[int]:
    """``root`` and every live descendant (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = [root], [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        tree += children
        frontier = children
    return tree


class _Producer(threading.Thread):
    """Puts events at a steady rate until stopped, in chunks of ten seconds."""

    def __init__(self, local: LocalInstance, rate: float) -> None:
        super().__init__(daemon=True)
        self.local, self.rate = local, rate
        self.stopping = threading.Event()

    def run(self) -> None:
        chunk = 0
        while not self.stopping.is_set():
            spec = MixSpec(
                count=max(1, int(self.rate * 10)),
                seed=chunk,
                id_prefix=f"{self.local.instance.domain}-c{chunk}",
                schema=self.local.schema,
            )
            self.local.produce(generate(spec, now_utc()), rate=self.rate)
            chunk += 1


def measure(
    local: LocalInstance, args: argparse.Namespace, moto_log: Path, efo_url: str | None
) -> TargetCounts:
    target = "serverless" if local.instance.compute == "serverless" else "emr"
    producer = _Producer(local, args.rate)
    local.start_job()
    producer.start()
    try:
        poll_until(
            lambda: local.batches() >= args.cold,
            timeout=args.timeout,
            interval=0.5,
            on_timeout=lambda: TimeoutError(
                f"{local.name}: no {args.cold} batches\n{local.log_tail()}"
            ),
        )
        assert local.job is not None
        trace = local.root / "strace.log"
        errors = local.root / "strace.err"
        pids = process_tree(local.job.pid)
        command = ["strace", "-f", "-ttt", "-s", "1000", "-e", f"trace={TRACED}", "-o", str(trace)]
        for pid in pids:
            command += ["-p", str(pid)]
        with errors.open("w") as err:
            strace = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        poll_until(
            # one line per process: attached, or gone before strace got to it
            lambda: (
                sum(map(errors.read_text().count, ("attached", "No such process"))) >= len(pids)
            ),
            timeout=60,
            interval=0.1,
            on_timeout=lambda: TimeoutError(f"strace: {errors.read_text()[-500:]}"),
        )
        first = _next_commit(local, max(local.committed_batches()), args.timeout)
        start, served_before = time.time(), _served(efo_url)
        last = first
        while last < first + args.batches:
            last = _next_commit(local, last, args.timeout)
        end, served_after = time.time(), _served(efo_url)
        _detach(strace)
    finally:
        producer.stopping.set()
        if local.job is not None and local.job.running:
            local.stop_job(timeout=180)
    window = {
        "target": target,
        "instance": local.name,
        "start": start,
        "end": end,
        "batches": last - first,
        "cold": args.cold,
        "subscriptions": served_after - served_before,
        "efo": local.config.source.consumer_type == "SubscribeToShard",
        "partitions": _state_partitions(local.checkpoint),
        "shards": local.shard_count or 4,  # moto's on-demand stream has 4
        "measured": datetime.now(UTC).date().isoformat(),
    }
    (local.root / WINDOW_FILE).write_text(json.dumps(window, indent=2), encoding="utf-8")
    return analyse(local.root, moto_log)


def analyse(root: Path, moto_log: Path, traced_root: Path | None = None) -> TargetCounts:
    """The counts of one measured instance, from the logs its run left in
    ``root`` (``--analyse-only`` runs this again on them; ``traced_root``: the
    directory the job ran in, when the logs were moved since)."""
    window = json.loads((root / WINDOW_FILE).read_text(encoding="utf-8"))
    start, end = float(window["start"]), float(window["end"])
    traced = str(traced_root or root)
    requests = request_log.window(
        request_log.from_strace((root / "strace.log").read_text().splitlines(), traced),
        start,
        end,
    )
    efo = bool(window["efo"])
    for made in request_log.window(
        request_log.from_moto(moto_log.read_text().splitlines()), start, end
    ):
        if made.api in PRODUCER_APIS or (efo and made.api in FRONT_APIS):
            continue
        if made.service in ("kinesis", "monitoring"):
            requests.append(made)
    requests += [
        request_log.Request(start, "kinesis", "SubscribeToShard")
        for _ in range(int(window["subscriptions"]))
    ]
    counts = request_log.per_batch(requests, int(window["batches"]))
    return TargetCounts(
        str(window["target"]),
        str(window["instance"]),
        int(window["batches"]),
        int(window["cold"]),
        str(window["measured"]),
        tuple(Count(s, a, p, n) for (s, a, p), n in counts.items()),
        request_log.serial(
            counts, partitions=int(window["partitions"]), shards=int(window["shards"])
        ),
    )


def _detach(strace: subprocess.Popen[bytes]) -> None:
    """strace detaches on SIGINT; from a JVM's thousands of threads it may not
    finish, and a tracer that is killed releases its tracees anyway."""
    strace.send_signal(signal.SIGINT)
    try:
        strace.wait(timeout=10)
    except subprocess.TimeoutExpired:
        strace.kill()
        strace.wait(timeout=30)


def _next_commit(local: LocalInstance, after: int, timeout: float) -> int:
    found: list[int] = []

    def committed() -> bool:
        done = local.committed_batches()
        newer = [b for b in done if b > after]
        found[:] = [min(newer)] if newer else []
        return bool(newer)

    poll_until(
        committed,
        timeout=timeout,
        interval=0.05,
        on_timeout=lambda: TimeoutError(
            f"{local.name}: no batch after {after}\n{local.log_tail()}"
        ),
    )
    return found[0]


def _served(efo_url: str | None) -> int:
    return read_stats(efo_url)["served"] if efo_url else 0


def _state_partitions(checkpoint: Path) -> int:
    """The shuffle partitions the state store is split into (state/0/<n>)."""
    state = checkpoint / "state" / "0"
    found = [p for p in state.iterdir() if p.name.isdigit()] if state.exists() else []
    return max(1, len(found))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    moto_log = WORK_DIR / "moto-requests.log"
    if args.analyse_only:
        found = [analyse(w.parent, moto_log) for w in sorted(WORK_DIR.glob(f"*/{WINDOW_FILE}"))]
        return _write({c.target: c for c in found}, args.out)
    if shutil.which("strace") is None:
        print("bench.requests: strace is needed (apt-get install strace)", file=sys.stderr)
        return 2
    if WORK_DIR.exists():
        shutil.rmtree(WORK_DIR)
    WORK_DIR.mkdir(parents=True)
    os.environ[request_log.REQUEST_LOG_ENV] = str(moto_log)
    instances = select_instances(load_example_instances(), args.instances.split(","))
    results: dict[str, TargetCounts] = {}
    with running_emulators(WORK_DIR / "logs") as emulators:
        endpoints = emulators.endpoints
        for instance in instances:
            local = LocalInstance.create(
                instance,
                local_run.instance_dir(WORK_DIR, instance.instance_id),
                endpoints,
                overrides={"trigger_interval_sec": args.trigger_interval_sec},
            )
            counted = measure(local, args, moto_log, endpoints.kinesis_efo_url)
            results[counted.target] = counted
    return _write(results, args.out)


def _write(results: dict[str, TargetCounts], out: Path) -> int:
    for counted in results.values():
        print(_render(counted), flush=True)
    out.write_text(to_json(results, "python -m bench.requests"), encoding="utf-8")
    print(f"wrote {out}")
    return 0


def _render(counts: TargetCounts) -> str:
    lines = [
        f"{counts.target} ({counts.instance}): {counts.batches} batches after "
        f"{counts.cold_batches} cold ones; serial {counts.serial:.1f}"
    ]
    for c in counts.counts:
        lines.append(f"  {c.service:<11}{c.api:<20}{c.prefix:<16}{c.per_batch:8.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
