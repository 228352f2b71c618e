"""Put sample events on a Kinesis stream: moto locally, or a real stream.

``python -m producer.producer --stream S --region R --count N`` generates the
exact mix of :mod:`producer.events` and sends it with :mod:`producer.stream_writer`
(``PutRecords`` through :mod:`producer.kinesis_put`, the writer ``reprocess`` uses
too). A record that still fails after the last attempt stops the run with an
error, because a producer that drops records silently would make every count
downstream a lie. Here: the command's flags, shared with ``make produce``
(:func:`add_mix_arguments`) and ``make run`` (:func:`add_aggregate_arguments`),
and what they resolve to.

What it prints (and writes with ``--report``) is what the job must produce:
the ids the table must hold, and the key and reason of every record that must
reach the failure topic. The key is the source coordinate stream/shard/sequence
number, known only after Kinesis accepted the record.

``--aggregate N`` packs up to N consecutive records into one KPL aggregate
(awslabs' aggregator, :mod:`producer.aggregation`), as a KPL producer does;
``--aggregate-share S`` aggregates that share of the groups (the others go
as plain records). The counts stay counts of user records (events); the report
adds how many Kinesis records were put and how many were aggregates. Failure
records of one aggregate share its sequence number; their failure keys differ
by the sub-sequence number (stream/shard/sequence/sub, in the job's
de-duplication, on the topic and in the claim-check store). A
``bad_aggregate`` record (a corrupt aggregate) always goes alone.

``--instance ID`` makes the events follow that instance's own schema (its
``job.event_fields`` in ``cdk.json``, ``--cdk-json`` to read another file)
and, unless given, takes ``--stream`` and ``--region`` from it too
(``python -m producer.producer --instance orders-eu-west-1 --count N``); without
it the events carry the default fields and both are required.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from infra.config import UndeclaredInstanceError, declared_instance
from model.record import TOO_LARGE
from producer.arguments import non_negative_float, non_negative_int, positive_int
from producer.arguments import share as share_type
from producer.events import (
    DEFAULT_FAILURE_KINDS,
    DEFAULT_SCHEMA,
    FAILURE_KINDS,
    EventSchema,
    MixSpec,
    SampleRecord,
    generate,
    now_utc,
)
from producer.stream_writer import (
    ProduceError,
    ProduceReport,
    ensure_stream,
    kinesis_client,
    plan_entries,
    put_all,
)

# The repository's cdk.json: where --instance finds an instance's schema.
CDK_JSON: Final = Path(__file__).resolve().parents[1] / "cdk.json"


def add_mix_arguments(parser: argparse.ArgumentParser, *, id_prefix: str = "evt") -> None:
    """The options of the event mix and its pace: shared by ``python -m
    producer.producer`` and ``python -m scripts.produce`` (``make produce``)."""
    add_count_and_rate_arguments(parser, rate=0.0)
    add_mix_knob_arguments(parser)
    parser.add_argument(
        "--failure-kinds",
        default=",".join(DEFAULT_FAILURE_KINDS),
        help=f"comma-separated malformed kinds to cycle through (of {', '.join(FAILURE_KINDS)})",
    )
    parser.add_argument(
        "--too-large-bytes",
        type=non_negative_int,
        default=0,
        help=f"size of {TOO_LARGE} records (above the job's max_record_bytes)",
    )
    parser.add_argument(
        "--undeclared-key",
        default="",
        help="a key the instance does not declare, added to some valid events",
    )
    parser.add_argument(
        "--undeclared-share",
        type=share_type,
        default=0.0,
        help="share of the valid events carrying --undeclared-key (default 0)",
    )
    parser.add_argument(
        "--id-prefix", default=id_prefix, help=f"prefix of event ids (default {id_prefix})"
    )
    parser.add_argument("--report", type=Path, help="write the full report (ids, keys) as JSON")
    add_aggregate_arguments(parser)


def add_count_and_rate_arguments(
    parser: argparse.ArgumentParser, *, rate: float, each: str = ""
) -> None:
    """``--count`` (records to put, default 5000) and ``--rate`` (most records
    a second, 0: unthrottled), each ``each`` (`` per instance`` for ``make
    run``): shared by :func:`add_mix_arguments` and ``python -m local``."""
    parser.add_argument(
        "--count",
        type=non_negative_int,
        default=5000,
        help=f"records to put{each} (default 5000)",
    )
    parser.add_argument(
        "--rate",
        type=non_negative_float,
        default=rate,
        help=f"max records per second{each} (default {rate:g}; 0: unthrottled)",
    )


def add_mix_knob_arguments(parser: argparse.ArgumentParser) -> None:
    """``--malformed-share``, ``--duplicate-share``, ``--nanos`` and ``--seed``,
    defaulting to :class:`MixSpec`'s defaults: shared by :func:`add_mix_arguments`
    and ``python -m local`` (``make run``)."""
    malformed, duplicate, seed = MixSpec.malformed_share, MixSpec.duplicate_share, MixSpec.seed
    nanos = "on" if MixSpec.nanos else "off"
    parser.add_argument(
        "--malformed-share", type=share_type, default=malformed, help=f"default {malformed}"
    )
    parser.add_argument(
        "--duplicate-share", type=share_type, default=duplicate, help=f"default {duplicate}"
    )
    parser.add_argument(
        "--nanos",
        action=argparse.BooleanOptionalAction,
        default=MixSpec.nanos,
        help=f"occurredAt with 9 fractional digits and an offset (default {nanos})",
    )
    parser.add_argument("--seed", type=int, default=seed, help=f"RNG seed (default {seed})")


def add_aggregate_arguments(
    parser: argparse.ArgumentParser, *, size: int = 0, share: float = 1.0
) -> None:
    """``--aggregate N`` and ``--aggregate-share S`` (:func:`plan_entries`)."""
    parser.add_argument(
        "--aggregate",
        type=non_negative_int,
        default=size,
        metavar="N",
        help="pack up to N records into one KPL aggregated record (awslabs' format, as the "
        f"Kinesis Producer Library writes it; default {size}: {'off' if not size else 'on'})",
    )
    parser.add_argument(
        "--aggregate-share",
        type=share_type,
        default=share,
        metavar="S",
        help=f"with --aggregate: the share of groups packed, the rest sent plain (default {share})",
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m producer.producer",
        description="Put a known mix of sample events on a Kinesis stream (moto or real).",
    )
    parser.add_argument(
        "--stream", help="Kinesis stream name (default: the --instance's, from --cdk-json)"
    )
    parser.add_argument(
        "--region", help="AWS region of the stream (default: the --instance's, from --cdk-json)"
    )
    parser.add_argument("--endpoint-url", help="Kinesis endpoint (moto: http://127.0.0.1:PORT)")
    add_mix_arguments(parser)
    parser.add_argument(
        "--create", action="store_true", help="create the stream if absent (--shards)"
    )
    parser.add_argument(
        "--shards", type=positive_int, default=None, help="with --create; none: on-demand"
    )
    parser.add_argument(
        "--instance",
        help="a declared instance (domain-region) whose job.event_fields the events follow "
        "(default: the default fields)",
    )
    parser.add_argument(
        "--cdk-json", type=Path, default=CDK_JSON, help="where --instance is declared"
    )
    args = parser.parse_args(argv)
    if args.instance is None and (args.stream is None or args.region is None):
        parser.error("--stream and --region are required without --instance")
    return args


def stream_and_region(args: argparse.Namespace) -> tuple[str, str]:
    """``--stream`` and ``--region``, or the declared ``--instance``'s stream
    and region from ``--cdk-json`` for what they leave out. Raises
    ValueError naming the declared instances when there is no such one."""
    if args.stream is not None and args.region is not None:
        return args.stream, args.region
    try:
        declared = declared_instance(args.cdk_json, args.instance)
    except UndeclaredInstanceError as exc:
        raise ValueError(
            f"--instance: {args.instance!r} is not declared in {args.cdk_json}; "
            f"allowed: {', '.join(exc.declared)}"
        ) from exc
    return args.stream or declared.stream_name, args.region or declared.region


def instance_schema(instance_id: str, cdk_json: Path = CDK_JSON) -> EventSchema:
    """The event schema of a declared instance, as ``cdk synth`` reads it.
    Raises ValueError naming the declared instances when there is no such one."""
    try:
        return EventSchema.of(declared_instance(cdk_json, instance_id).job)
    except UndeclaredInstanceError as exc:
        allowed = ", ".join(exc.declared)
        raise ValueError(
            f"--instance: {instance_id!r} is not declared in {cdk_json}; allowed: {allowed}"
        ) from exc


def spec_from_args(args: argparse.Namespace, schema: EventSchema = DEFAULT_SCHEMA) -> MixSpec:
    """The mix the options ask for, of events of ``schema``."""
    kinds = tuple(k for k in args.failure_kinds.split(",") if k)
    return MixSpec(
        count=args.count,
        malformed_share=args.malformed_share,
        duplicate_share=args.duplicate_share,
        nanos=args.nanos,
        seed=args.seed,
        id_prefix=args.id_prefix,
        failure_kinds=kinds,
        too_large_bytes=args.too_large_bytes,
        schema=schema,
        undeclared_key=args.undeclared_key,
        undeclared_share=args.undeclared_share,
    )


def put_as_asked(
    client: Any, stream: str, records: Sequence[SampleRecord], args: argparse.Namespace
) -> ProduceReport:
    """:func:`put_all` of ``records`` paced and aggregated as the flags of
    :func:`add_mix_arguments` ask (``--rate``, ``--aggregate``, ``--aggregate-share``):
    the one place those flags reach the sending, for ``python -m producer.producer``
    and ``python -m scripts.produce`` alike."""
    return put_all(
        client,
        stream,
        records,
        rate=args.rate,
        aggregate_size=args.aggregate,
        aggregate_share=args.aggregate_share,
    )


def write_report(report: ProduceReport, path: Path) -> None:
    """The full report (ids, failure keys, last sequence per shard) as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_dict(), indent=1), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        schema = (
            DEFAULT_SCHEMA
            if args.instance is None
            else instance_schema(args.instance, args.cdk_json)
        )
        spec = spec_from_args(args, schema)
        plan_entries([], args.aggregate, args.aggregate_share)  # validates both
        stream, region = stream_and_region(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    client = kinesis_client(region, args.endpoint_url)
    if args.create:
        ensure_stream(client, stream, args.shards)
    try:
        report = put_as_asked(client, stream, generate(spec, now_utc()), args)
    except ProduceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.report:
        write_report(report, args.report)
    print(json.dumps(report.to_dict(full=False), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
