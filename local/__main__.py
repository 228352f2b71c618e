"""``make run``: the whole pipeline on this machine, then a verdict.

Starts moto (Kinesis, S3, CloudWatch) and a tansu broker on free loopback
ports, creates each selected instance's stream and failure topic from
``cdk.json`` (the instances ``cdk synth`` builds), starts the job exactly as
EMR does (``python -m job --config ...``, same ``main()``, same Spark conf
source, Hive catalog on an embedded metastore under ``.work/``), produces a
known mix of events while it runs, shows progress, stops the job with its stop
marker once every produced record is in the table or on the failure topic,
prints a summary, saves what it read as a metrics dump (``metrics.json``) and
renders the run report from it (``report/index.html``, PNG charts beside it;
:mod:`local.report`). Exit 0 only if every event is accounted for exactly once.

Emulators and jobs are stopped on exit, on failure, on Ctrl-C and on SIGTERM.

A job stopped by an operator meanwhile (``make stop-job --work-dir``; its
exit record says so) is not a failure of the run: the run says so in one
line. With ``--keep-emulators`` it waits instead for ``make start-job
--work-dir`` to start the job again and carries on to the verdict; after the
verdict the emulators (and any job started again) stay up until Ctrl-C, so
that the operator commands can be tried at leisure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from types import FrameType
from typing import Any, Final

from local.declare_field import write_declared_copy
from local.emulators import running_emulators
from local.harness import (
    CDK_JSON,
    LocalInstance,
    load_example_instances,
    select_instances,
)
from local.job_process import REPO_ROOT
from local.metrics_dump import RunDump
from local.report import render
from local.run_dump import DUMP_NAME, collect, write_dump
from local.serverless_launch import describe as describe_target
from local.summary import Summary
from model.polling import poll_until
from model.record import UNDECLARED_FIELDS
from producer import local_run
from producer.arguments import positive_float, share
from producer.events import FAILURE_KINDS, MixSpec, generate, now_utc
from producer.producer import (
    add_aggregate_arguments,
    add_count_and_rate_arguments,
    add_mix_knob_arguments,
)
from producer.stream_writer import ProduceReport

DEFAULT_WORK_DIR: Final = REPO_ROOT / local_run.DEFAULT_WORK_DIR
REPORT_DIR: Final = "report"
# The local run lowers the record size limit so that the ``too_large`` failure
# kind can be shown: Kinesis itself refuses records above 1 MiB, the default.
LOCAL_MAX_RECORD_BYTES: Final = 65_536
# make run's KPL aggregation: groups of up to 10 events, every other group packed.
RUN_AGGREGATE_SIZE: Final = 10
RUN_AGGREGATE_SHARE: Final = 0.5


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m local",
        description="Run the streaming pipeline locally on emulators and verify it.",
    )
    parser.add_argument(
        "--instances",
        default="",
        help="comma-separated instance ids or domains from cdk.json (default: the first)",
    )
    add_count_and_rate_arguments(parser, rate=1000.0, each=" per instance")
    add_mix_knob_arguments(parser)
    parser.add_argument(
        "--trigger-interval-sec", type=int, default=2, help="micro-batch trigger (default 2)"
    )
    parser.add_argument(
        "--max-fetch-records-per-shard",
        type=int,
        default=500,
        help="per-shard records per micro-batch (default 500: a backlog takes several batches)",
    )
    parser.add_argument(
        "--timeout", type=float, default=240.0, help="max seconds to wait for the job"
    )
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR)
    parser.add_argument("--progress-every", type=positive_float, default=3.0, help="seconds")
    # Half of the events travel in KPL aggregates of up to 10, half as plain
    # records: the source's de-aggregation is part of every local run.
    add_aggregate_arguments(parser, size=RUN_AGGREGATE_SIZE, share=RUN_AGGREGATE_SHARE)
    parser.add_argument(
        "--declare",
        metavar="FIELD",
        default="",
        help="the schema story: FIELD first arrives undeclared in --undeclared-share of the "
        "events (kept and counted), then a copy of cdk.json declares it (optional string), "
        "each job is redeployed through the handover and --count more events carry it",
    )
    parser.add_argument("--undeclared-share", type=share, default=0.2, help="with --declare")
    parser.add_argument(
        "--keep-emulators",
        action="store_true",
        help="after the verdict keep the emulators up until Ctrl-C, for the operator commands "
        "(--work-dir); a job an operator stops meanwhile is waited for, not a failure",
    )
    return parser.parse_args(argv)


class OperatorStopError(RuntimeError):
    """The job was stopped by an operator before the run was done: its exit
    record says so. Not a failure of the pipeline: nothing is lost."""


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _say(text: str) -> None:
    print(text, flush=True)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    wanted = [n.strip() for n in args.instances.split(",") if n.strip()]
    instances = select_instances(load_example_instances(), wanted)
    root: Path = args.work_dir.resolve()
    if root.exists():
        shutil.rmtree(root)  # a fresh moto has no stream behind an old checkpoint
    root.mkdir(parents=True)
    _say(f"work dir {root}")
    _say(f"instances: {', '.join(i.instance_id for i in instances)}")

    with running_emulators(root / "logs") as emulators:
        endpoints = emulators.endpoints
        _say(f"moto {endpoints.aws_url}  tansu {endpoints.kafka_bootstrap}")
        locals_: list[LocalInstance] = []
        try:
            for instance in instances:
                local = LocalInstance.create(
                    instance,
                    local_run.instance_dir(root, instance.instance_id),
                    endpoints,
                    overrides={
                        "trigger_interval_sec": args.trigger_interval_sec,
                        "max_record_bytes": LOCAL_MAX_RECORD_BYTES,
                        "source": {"max_fetch_records_per_shard": args.max_fetch_records_per_shard},
                    },
                )
                locals_.append(local)
                _say(
                    f"[{local.name}] stream {local.config.stream_name} "
                    f"({local.shard_count or 'on-demand'} shards), "
                    f"topic {local.config.kafka.topic}, database {local.config.database}"
                )
            for local in locals_:
                local.start_job()
                _say(
                    f"[{local.name}] job started (pid {local.job.pid if local.job else '?'}), "
                    f"log {local.log_path}"
                )
                _say(f"[{local.name}] {describe_target(local.instance)}")
            _produce_and_wait(locals_, args, undeclared=args.declare)
            if args.declare:
                _declare_and_redeploy(locals_, args.declare, root)
                _produce_and_wait(locals_, args, round_=1)
            codes = _stop_all(locals_)
            summaries = []
            for local in locals_:
                summary = local.summary()
                local.write_summary(summary)
                summaries.append(summary)
            report = _write_report(locals_, summaries, root)
            targets = {lo.name: describe_target(lo.instance) for lo in locals_}
            if args.keep_emulators:
                verdict = _report(summaries, codes, report, time.monotonic() - started, targets)
                _hold(locals_, emulators.endpoints, root)
                return verdict
        finally:
            for local in locals_:
                for job in local.all_jobs:
                    job.close()
    return _report(summaries, codes, report, time.monotonic() - started, targets)


def _write_report(locals_: list[LocalInstance], summaries: list[Summary], root: Path) -> str:
    """Save the metrics dump and render the report from it; returns the page's
    path, or why there is none (the report never overrules the verdict)."""
    try:
        dump = RunDump(tuple(collect(lo, s) for lo, s in zip(locals_, summaries, strict=True)))
        source = write_dump(dump, root / DUMP_NAME)
        return str(render(dump, root / REPORT_DIR, source=str(source)))
    except Exception as exc:  # the emulators may be gone; the verdict still stands
        return f"not written ({type(exc).__name__}: {exc})"


def _declare_and_redeploy(locals_: list[LocalInstance], name: str, root: Path) -> None:
    """A copy of ``cdk.json`` (in the work dir) declares ``name`` as an
    optional string for every running instance; each job is redeployed from
    it: the old version stops, the new one adds the column at start."""
    copy = root / "cdk.json"
    source = CDK_JSON
    for local in locals_:
        source = write_declared_copy(
            source, copy, local.name, {"name": name, "type": "string", "required": False}
        )
    declared = {i.instance_id: i for i in load_example_instances(copy)}
    for local in locals_:
        local.redeploy(declared[local.name])
        _say(
            f"[{local.name}] {name!r} declared in {copy}; job redeployed (pid "
            f"{local.job.pid if local.job else '?'}): the table gets the column at start, "
            f"earlier rows keep {name!r} in {UNDECLARED_FIELDS}"
        )


def _produce_and_wait(
    locals_: list[LocalInstance],
    args: argparse.Namespace,
    *,
    undeclared: str = "",
    round_: int = 0,
) -> None:
    """Produce on every instance at once while the jobs run; then poll until
    every produced record is in its table or on its topic. ``undeclared``: a
    key the schema does not declare, in ``--undeclared-share`` of the valid
    events; ``round_`` > 0: a later round (other ids, another seed)."""
    start = now_utc()
    deadline = time.monotonic() + args.timeout
    futures: list[Future[ProduceReport]] = []
    # Records sent so far, per instance (put_all's on_progress).
    progress: list[list[int]] = [[0] for _ in locals_]
    with ThreadPoolExecutor(max_workers=len(locals_)) as pool:
        for local, sent in zip(locals_, progress, strict=True):
            spec = MixSpec(
                count=args.count,
                malformed_share=args.malformed_share,
                duplicate_share=args.duplicate_share,
                nanos=args.nanos,
                seed=args.seed + round_,
                id_prefix=local.instance.domain + (f"-r{round_}" if round_ else ""),
                failure_kinds=FAILURE_KINDS,
                too_large_bytes=LOCAL_MAX_RECORD_BYTES + 1024,
                schema=local.schema,
                undeclared_key=undeclared,
                undeclared_share=args.undeclared_share if undeclared else 0.0,
            )
            futures.append(
                pool.submit(
                    local.produce,
                    generate(spec, start),
                    rate=args.rate,
                    aggregate_size=args.aggregate,
                    aggregate_share=args.aggregate_share,
                    on_progress=_progress_into(sent),
                )
            )
        # Each producer is bounded (client limits, attempts per record); say
        # how far each got while they run.
        began = time.monotonic()
        while wait(futures, timeout=args.progress_every).not_done:
            for local, sent in zip(locals_, progress, strict=True):
                _say(
                    f"[{local.name}] {time.monotonic() - began:5.0f}s  producing "
                    f"{args.count:,} events: {sent[0]:,} Kinesis records sent so far"
                )
        for local, future in zip(locals_, futures, strict=True):
            report = future.result()
            _say(
                f"[{local.name}] produced {len(report.placed):,} records in "
                f"{report.kinesis_records:,} Kinesis records ({report.aggregates:,} KPL "
                f"aggregates) in {report.seconds:.1f}s: {report.counts()}"
            )
    pending = list(locals_)
    # While an operator holds a job stopped (--keep-emulators), the run's
    # clock stands still: seconds paused so far, and since when.
    paused = [0.0]
    since: dict[str, float] = {}

    def all_accounted() -> bool:
        for local in list(pending):
            seen = local.observe()
            _say(seen.line(local.name))
            if seen.accounted:
                pending.remove(local)
            elif seen.job_running:
                if local.name in since:
                    paused[0] += time.monotonic() - since.pop(local.name)
                    _say(f"[{local.name}] job started again: waiting for the rest")
            elif local.stopped_by_operator():
                if local.name not in since:
                    if not args.keep_emulators:
                        raise OperatorStopError(_operator_stop_line(local, seen, args, None))
                    since[local.name] = time.monotonic()
                    _say(_operator_stop_line(local, seen, args, root_of(local)))
            else:
                code = local.job.returncode if local.job else None
                raise RuntimeError(
                    f"[{local.name}] job exited (code {code}) before processing everything; "
                    f"log tail:\n{local.log_tail(40)}"
                )
        if not pending:
            return True
        if not since and time.monotonic() - paused[0] > deadline:
            raise _not_accounted(pending, args.timeout)
        return False

    poll_until(
        all_accounted,
        timeout=float("inf"),
        interval=args.progress_every,
        on_timeout=lambda: _not_accounted(pending, args.timeout),
    )


def root_of(local: LocalInstance) -> Path:
    """The run's work dir (the parent of the instance's own directory)."""
    return local.root.parent


def _operator_stop_line(
    local: LocalInstance, seen: Any, args: argparse.Namespace, work_dir: Path | None
) -> str:
    """One line for a job an operator stopped: what its exit record says, how
    far it got, and how it starts again (``work_dir``: the run waits for it)."""
    record = local.exit_record()
    said = record.line() if record is not None else "stopped on request by operator"
    if work_dir is not None and args.keep_emulators:
        return (
            f"[{local.name}] job stopped by an operator ({said}); rows {seen.rows:,}/"
            f"{seen.expected_rows:,}: waiting for make start-job INSTANCE={local.name} "
            f'ARGS="--work-dir {work_dir}" (Ctrl-C ends the run)'
        )
    return (
        f"[{local.name}] job stopped by an operator ({said}) before every record was "
        f"accounted for (rows {seen.rows:,}/{seen.expected_rows:,}); nothing is lost, the "
        f'rest waits on the stream. make run ARGS="--keep-emulators" keeps the run going '
        "until make start-job starts the job again"
    )


def _not_accounted(pending: list[LocalInstance], timeout: float) -> TimeoutError:
    return TimeoutError(
        f"not all records accounted for within {timeout:.0f}s: "
        + ", ".join(lo.name for lo in pending)
        + "\n"
        + "\n".join(lo.log_tail(30) for lo in pending)
    )


def _hold(locals_: list[LocalInstance], endpoints: Any, root: Path) -> None:
    """--keep-emulators: say how to reach the emulators and how to stop them,
    then wait for Ctrl-C (or SIGTERM); then stop any job still running."""
    first = locals_[0].name
    work = f'ARGS="--work-dir {root}"'
    _say(
        "emulators kept up (--keep-emulators): moto (Kinesis, S3, CloudWatch) "
        f"{endpoints.aws_url}, "
        f"Kafka (tansu) {endpoints.kafka_bootstrap}; credentials: any, e.g. "
        "AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing"
    )
    for local in locals_:
        _say(
            f"[{local.name}] job {'running' if local.job_running else 'stopped'}, "
            f"log {local.log_path}"
        )
    _say(
        f"try: make status INSTANCE={first} {work}; make start-job / make stop-job / "
        f"make produce INSTANCE={first} {work}"
    )
    _say(f"Ctrl-C here (or kill {os.getpid()}) stops the emulators and any job of this run")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        _say("stopping: jobs first, then the emulators")
    for local in locals_:
        code = local.stop_any_job()
        if code is not None:
            _say(f"[{local.name}] job exited with code {code}")


def _progress_into(cell: list[int]) -> Callable[[int], None]:
    """A ``put_all`` progress callback keeping the latest count in ``cell``."""

    def record(sent: int) -> None:
        cell[0] = sent

    return record


def _stop_all(locals_: list[LocalInstance]) -> dict[str, int]:
    """Stop every job once all is accounted for: the harness's own child, or
    one ``make start-job`` started again after an operator's stop."""
    codes: dict[str, int] = {}
    for local in locals_:
        _say(f"[{local.name}] all records accounted for: stopping the job (stop marker)")
        code = local.stop_any_job(timeout=120)
        if code is None:  # already stopped: its last exit says how
            record = local.exit_record()
            code = record.code if record is not None else 1
        codes[local.name] = code
        _say(f"[{local.name}] job exited with code {code}")
    return codes


def _report(
    summaries: list[Summary],
    codes: dict[str, int],
    report: str,
    seconds: float,
    targets: dict[str, str] | None = None,
) -> int:
    _say("")
    _say("=" * 72)
    ok = True
    for summary in summaries:
        for line in summary.lines():
            _say(line)
        code = codes.get(summary.figures.instance)
        _say(f"  job exit code         {code}")
        if targets and summary.figures.instance in targets:
            _say(f"  {targets[summary.figures.instance]}")
        ok = ok and summary.ok and code == 0
    _say(f"report {report}")
    _say(f"wall time {seconds:.0f}s -> {'PASS' if ok else 'FAIL'}")
    _say("=" * 72)
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    previous: Any = signal.signal(signal.SIGTERM, _raise_interrupt)
    # Ctrl-C must reach the cleanup even when the shell started us with SIGINT
    # ignored (a background job of a non-interactive shell).
    previous_int: Any = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return run(args)
    except KeyboardInterrupt:
        print("interrupted: emulators and jobs stopped", file=sys.stderr)
        return 130
    except OperatorStopError as exc:
        print(f"stopped by an operator: {exc}", file=sys.stderr)
        return 1
    except (RuntimeError, TimeoutError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


if __name__ == "__main__":
    sys.exit(main())
