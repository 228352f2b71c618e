"""Re-send an instance's failure records to its stream: ``make reprocess INSTANCE=<domain-region>``.

``python -m scripts.reprocess --instance orders-eu-west-1 --msk-cluster-arn ARN
[--reason R ...] [--from-offset N | --from-time T] [--to-time T] [--fix mod:fn]
[--dry-run]`` reads the instance's failure topic (names from ``cdk.json``
through ``infra.config``, as the stack names them), optionally repairs each
record with a fix-up hook, and puts the bytes back on the instance's Kinesis
stream with PutRecords, where the job reads them like any other record.

Nothing is lost, something may be re-sent twice: the consumer group
(``reprocess-<instance>``) commits a partition's position only past records
Kinesis accepted, after each request, and never past a record that was not
re-sent (rejected by the hook, filtered out, refused by Kinesis). A crash
between a put and its commit re-sends that request on the next run; the job's
de-duplication by event id (within ``dedup_horizon_hours``) absorbs it. A
rejected record holds its partition's position, so every run re-reads it until
the hook accepts it or an operator moves past it with ``--from-offset``
(docs/operate.md, "Reprocess failures").

Exit codes: 0 every selected record re-sent (or rejected, and listed);
1 some records failed (Kinesis refused them after every attempt, or too
large) or the run stopped on an error; 2 bad arguments or configuration.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO, get_args

from infra.config import InstanceConfig
from model.config import KafkaSecurity
from model.record import REASONS
from producer.arguments import int_between, non_negative_float, positive_int
from producer.kinesis_put import MAX_RECORDS_PER_CALL, PutOutcome, put_entries
from producer.stream_writer import kinesis_client
from scripts.command import EXIT_USAGE, OperatorError, declared_instance
from scripts.reprocess.claim_check import resolver, store_reader
from scripts.reprocess.hook import FailedRecord, Fix, HookError, Reject, identity, load_hook
from scripts.reprocess.kafka import FailureTopicReader, resolve_topic
from scripts.reprocess.plan import (
    Entry,
    PlanError,
    Positions,
    Selection,
    Start,
    parse_from_offsets,
    parse_reasons,
    parse_time,
    start_offsets,
)
from scripts.reprocess.run import Commit, Send, print_report, reprocess

__all__ = ["FailedRecord", "Reject", "main"]

EXIT_OK, EXIT_FAILED = 0, 1
GROUP_PREFIX: Final = "reprocess-"
# PutRecords calls per request before its still-refused entries count as failed.
DEFAULT_MAX_ATTEMPTS: Final = 10


class UsageError(ValueError):
    """Bad arguments or configuration (exit 2)."""


def default_group(instance_id: str) -> str:
    return f"{GROUP_PREFIX}{instance_id}"


# ------------------------------------------------------------------ output


def print_plan(
    out: TextIO,
    options: Options,
    *,
    topic: str,
    starts: Sequence[Start],
    watermarks: dict[int, tuple[int, int]],
    dry_run: bool,
) -> None:
    instance = options.instance
    reasons = ", ".join(sorted(options.selection.reasons)) or "every reason"
    print(
        f"{'DRY RUN: nothing is sent or committed. ' if dry_run else ''}"
        f"instance {instance.instance_id}: topic {topic} -> stream {instance.stream_name} "
        f"({instance.region}); group {options.group}; {reasons}",
        file=out,
        flush=True,
    )
    for start in starts:
        low, high = watermarks[start.partition]
        print(
            f"  partition {start.partition}: from {start.offset} ({start.source}); "
            f"watermarks {low}..{high}",
            file=out,
        )
        if start.warning:
            print(f"  WARNING {start.warning}", file=out)
    out.flush()


# ------------------------------------------------------------------ CLI


@dataclass(frozen=True)
class Options:
    instance: InstanceConfig
    group: str
    selection: Selection
    from_offsets: dict[int | None, int]
    fix: Fix
    security: KafkaSecurity


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m scripts.reprocess",
        description="Re-send an instance's failure records (Kafka topic) to its Kinesis stream.",
    )
    p.add_argument("--instance", required=True, help="<domain>-<region> as declared in cdk.json")
    p.add_argument("--cdk-json", default="cdk.json", help="where the instances are declared")
    brokers = p.add_mutually_exclusive_group(required=True)
    brokers.add_argument("--kafka-bootstrap", help="host:port,... of the brokers (tansu locally)")
    brokers.add_argument(
        "--msk-cluster-arn", help="the instance's MSK cluster (stack output MskClusterArn)"
    )
    p.add_argument(
        "--kafka-security",
        choices=get_args(KafkaSecurity),
        help="default: MSK_IAM with --msk-cluster-arn, PLAINTEXT with --kafka-bootstrap",
    )
    p.add_argument("--kinesis-endpoint-url", help="Kinesis endpoint (moto: http://127.0.0.1:PORT)")
    p.add_argument(
        "--s3-endpoint-url",
        help="S3 endpoint of the claim-check store (moto: http://127.0.0.1:PORT); default: AWS",
    )
    p.add_argument("--group", help="consumer group of the position (default reprocess-<instance>)")
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--from-offset",
        action="append",
        default=[],
        help="N (every partition) or P:N (partition P); repeatable. Default: the group's position",
    )
    start.add_argument("--from-time", help="first record timestamp, ISO-8601 with an offset")
    p.add_argument("--to-time", help="end before this record timestamp (default: now)")
    p.add_argument(
        "--reason",
        action="append",
        default=[],
        help=f"only this failure reason (repeatable; of {', '.join(REASONS)})",
    )
    p.add_argument(
        "--fix", help="fix-up hook module:callable (default: re-send the original bytes)"
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be sent; touch nothing")
    p.add_argument(
        "--batch-records",
        type=int_between(1, MAX_RECORDS_PER_CALL),
        default=MAX_RECORDS_PER_CALL,
        help=f"records per PutRecords request, 1..{MAX_RECORDS_PER_CALL} (default: the most)",
    )
    p.add_argument(
        "--rate",
        type=non_negative_float,
        default=0.0,
        help="max records per second (default 0: no limit)",
    )
    p.add_argument(
        "--max-attempts",
        type=positive_int,
        default=DEFAULT_MAX_ATTEMPTS,
        help=f"PutRecords calls per request before its refused records fail "
        f"(default {DEFAULT_MAX_ATTEMPTS})",
    )
    return p.parse_args(argv)


def options_from_args(args: argparse.Namespace, now_ms: int) -> Options:
    try:
        instance = declared_instance(args.instance, Path(args.cdk_json))
    except OperatorError as exc:
        raise UsageError(str(exc)) from exc
    if not 1 <= args.batch_records <= MAX_RECORDS_PER_CALL:
        raise UsageError(f"--batch-records {args.batch_records}: must be 1..{MAX_RECORDS_PER_CALL}")
    if args.max_attempts < 1:
        raise UsageError(f"--max-attempts {args.max_attempts}: must be >= 1")
    if args.rate < 0:
        raise UsageError(f"--rate {args.rate}: must be >= 0")
    from_ms = parse_time("--from-time", args.from_time) if args.from_time else None
    to_ms = parse_time("--to-time", args.to_time) if args.to_time else now_ms
    if from_ms is not None and from_ms >= to_ms:
        raise UsageError(f"--from-time {args.from_time}: must be before --to-time ({to_ms} ms)")
    selection = Selection(parse_reasons(args.reason, REASONS), from_ms, to_ms)
    security: KafkaSecurity = args.kafka_security or (
        "MSK_IAM" if args.msk_cluster_arn else "PLAINTEXT"
    )
    return Options(
        instance=instance,
        group=args.group or default_group(instance.instance_id),
        selection=selection,
        from_offsets=parse_from_offsets(args.from_offset),
        fix=load_hook(args.fix) if args.fix else identity,
        security=security,
    )


def _refuse(_: list[Entry]) -> PutOutcome[FailedRecord]:
    raise AssertionError("dry run: nothing may be sent")


def _no_commit(_: dict[int, int]) -> None:
    raise AssertionError("dry run: nothing may be committed")


def kinesis_sender(region: str, endpoint_url: str | None, stream: str, max_attempts: int) -> Send:
    """One request at a time to ``stream``, re-sending refused entries (bounded)."""
    client = kinesis_client(region, endpoint_url)

    def send(batch: list[Entry]) -> PutOutcome[FailedRecord]:
        return put_entries(client, stream, batch, max_attempts=max_attempts)

    return send


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = parse_args(argv)
    try:
        options = options_from_args(args, int(time.time() * 1000))
    except (UsageError, PlanError, HookError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    instance = options.instance
    try:
        topic = resolve_topic(
            instance,
            bootstrap_servers=args.kafka_bootstrap,
            cluster_arn=args.msk_cluster_arn,
            security=options.security,
        )
        reader = FailureTopicReader(topic, options.group)
    except Exception as exc:
        print(f"error: failure topic of {instance.instance_id}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        try:
            partitions = reader.partitions()
            marks = reader.watermarks(partitions)
            committed = reader.committed(partitions)
            time_offsets = (
                reader.offsets_for_time(partitions, options.selection.from_ms)
                if options.selection.from_ms is not None
                else None
            )
            starts = start_offsets(
                partitions,
                marks,
                committed,
                from_offsets=options.from_offsets,
                time_offsets=time_offsets,
            )
        except PlanError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except Exception as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        print_plan(
            out, options, topic=topic.name, starts=starts, watermarks=marks, dry_run=args.dry_run
        )
        send = (
            _refuse
            if args.dry_run
            else kinesis_sender(
                instance.region, args.kinesis_endpoint_url, instance.stream_name, args.max_attempts
            )
        )
        commit: Commit = _no_commit if args.dry_run else reader.commit
        first = {s.partition: s.offset for s in starts}
        report = reprocess(
            reader.records(first, {p: high for p, (_, high) in marks.items()}, options.selection),
            Positions(first),
            selection=options.selection,
            fix=options.fix,
            send=send,
            commit=commit,
            dry_run=args.dry_run,
            batch_records=args.batch_records,
            rate=args.rate,
            out=out,
            resolve=resolver(store_reader(instance.region, args.s3_endpoint_url)),
        )
    finally:
        reader.close()
    print_report(report, out)
    return EXIT_OK if report.ok else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
