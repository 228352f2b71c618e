"""One instance at a glance: ``make status INSTANCE=<domain-region> [ARGS=...]``.

Prints, for the instance's job (``--work-dir`` for a local run, e.g.
``.work/run`` of ``make run``; otherwise the deployed stack, see
:mod:`scripts.status.target`):

* whether the job runs (its lease, :mod:`scripts.status.lease`);
* the stream's shards and their tips, the committed offset per shard from the
  checkpoint's last committed batch (:mod:`scripts.status.checkpoint`), and
  the lag per shard in records and in age (:mod:`scripts.status.kinesis`:
  exact when the backlog fits the scan, an estimate marked ``~`` otherwise);
* the last batches' figures and the alarm states from CloudWatch
  (:mod:`scripts.status.metrics`);
* the table's last snapshot (:mod:`scripts.status.table`);
* the table's Glue optimizers, enabled or not and their last run, a disabled
  or failed one flagged (:mod:`scripts.status.optimizers`; on AWS only);
* the supervisor's state (restarts in its window, last exit reason, given up
  or not) and the job's last exit record (:mod:`infra.supervisor.status`).

``--json`` prints the same as one JSON object. Reading the shards takes
GetRecords calls from the same 5-per-second-per-shard budget as the job's
own reads (https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html);
``--scan-calls`` bounds them (default 3 per shard).

Exit codes: 0 printed; 2 unknown instance, unreachable endpoint, missing
stream or checkpoint (one line naming it); 5 another AWS call failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from infra.supervisor.status import read_supervisor
from producer.arguments import non_negative_float, non_negative_int, positive_float, positive_int
from scripts.command import EXIT_USAGE, OperatorError
from scripts.status.checkpoint import SHARD_END, CheckpointFiles, read_checkpoint
from scripts.status.kinesis import Budget, list_shards, position_for, shard_status
from scripts.status.lease import job_state
from scripts.status.metrics import MetricsWindow, alarm_prefix, read_alarms, read_batches
from scripts.status.optimizers import Optimizers, not_available_locally, read_optimizers
from scripts.status.report import StatusReport, format_report, to_json
from scripts.status.table import read_snapshot
from scripts.status.target import Target, target_arguments, target_command
from scripts.status.undeclared import read_undeclared_keys

EXIT_OK: Final = 0
LOCAL_PERIOD_SEC: Final = 1
AWS_PERIOD_SEC: Final = 60


def table_optimizers(target: Target) -> Optimizers:
    """The events table's Glue optimizers; a local run (or any config whose
    catalog is not Glue) has none to read."""
    config = target.config
    if target.local or config.catalog.type != "glue":
        return not_available_locally()
    return read_optimizers(target.client("glue"), config.database, config.table)


def collect(target: Target, args: argparse.Namespace, now: Callable[[], datetime]) -> StatusReport:
    config = target.config
    kinesis, s3, cloudwatch = (target.client(s) for s in ("kinesis", "s3", "cloudwatch"))
    try:
        shards = list_shards(kinesis, config.stream_name)
    except kinesis.exceptions.ResourceNotFoundException as exc:
        raise OperatorError(
            EXIT_USAGE,
            f"stream {config.stream_name}: not found at "
            f"{target.endpoint('kinesis') or 'Kinesis in ' + config.region}",
        ) from exc
    checkpoint = read_checkpoint(CheckpointFiles(config.checkpoint_location, s3))
    committed = checkpoint.offset.positions if checkpoint.offset is not None else None
    budget = Budget(max_calls=args.scan_calls, max_records=args.scan_records)
    statuses = [
        shard_status(
            kinesis,
            config.stream_name,
            shard,
            position_for(shard, committed, config.source.starting_position),
            budget,
            tip_window_sec=args.tip_window_sec,
            now=now,
        )
        for shard in shards
    ]
    listed = {s.shard_id for s in shards}
    untracked = sorted(
        shard
        for shard, position in (committed or {}).items()
        if shard not in listed and position.kind != SHARD_END
    )
    at = now()
    period = args.metrics_period or (LOCAL_PERIOD_SEC if target.local else AWS_PERIOD_SEC)
    window = MetricsWindow(now=at, minutes=args.metrics_minutes, period_sec=period)
    return StatusReport(
        instance=target.instance_id,
        origin=target.origin,
        at=at,
        stream=config.stream_name,
        region=config.region,
        job=job_state(config, s3, at.timestamp()),
        checkpoint=checkpoint,
        shards=statuses,
        untracked_shards=untracked,
        batches=read_batches(cloudwatch, target.instance_id, window, last=args.batches),
        metrics_period_sec=period,
        metrics_minutes=args.metrics_minutes,
        alarm_prefix=alarm_prefix(target.stack_name),
        alarms=read_alarms(cloudwatch, target.stack_name),
        table_name=f"{config.database}.{config.table}",
        table=read_snapshot(config),
        optimizers=table_optimizers(target),
        supervisor=read_supervisor(config, s3),
        undeclared=read_undeclared_keys(cloudwatch, target.instance_id, window),
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m scripts.status", description=__doc__.split("\n")[0])
    target_arguments(p)
    p.add_argument("--json", action="store_true", help="print the status as JSON")
    p.add_argument(
        "--batches", type=non_negative_int, default=5, help="last batch rows to show (default 5)"
    )
    p.add_argument(
        "--metrics-minutes", type=positive_float, default=15.0, help="metrics window (default 15)"
    )
    p.add_argument(
        "--metrics-period",
        type=positive_int,
        help=f"seconds per row (default {LOCAL_PERIOD_SEC} locally, {AWS_PERIOD_SEC} on AWS)",
    )
    scan = Budget()
    p.add_argument(
        "--scan-calls",
        type=positive_int,
        default=scan.max_calls,
        help=f"GetRecords calls per shard at most (default {scan.max_calls})",
    )
    p.add_argument(
        "--scan-records",
        type=positive_int,
        default=scan.max_records,
        help=f"records counted per shard at most (default {scan.max_records})",
    )
    p.add_argument(
        "--tip-window-sec",
        type=non_negative_float,
        default=60.0,
        help="when the backlog exceeds the scan, look for the tip this far back (default 60)",
    )
    return p


def show(target: Target, args: argparse.Namespace, say: Callable[[str], None]) -> int:
    report = collect(target, args, lambda: datetime.now(UTC))
    say(to_json(report) if args.json else format_report(report))
    return EXIT_OK


def main(argv: Sequence[str] | None = None, out: Any = None) -> int:
    return target_command("status", parser(), show, argv, out)


if __name__ == "__main__":
    sys.exit(main())
