"""Put sample events on a Kinesis stream: moto locally, or a real stream.

``python -m ops.producer --stream S --region R --count N`` generates the
exact mix of :mod:`ops.events` and sends it with ``PutRecords`` through
:mod:`ops.kinesis_put` (the writer ``reprocess`` uses too: requests within the
API's limits, entries Kinesis rejects in a call re-sent with a bounded
exponential backoff). A record that still fails after the last attempt stops
the run with an error, because a producer that drops records silently would
make every count downstream a lie.

What it prints (and writes with ``--report``) is what the job must produce:
the ids the table must hold, and the key and reason of every record that must
reach the failure topic. The key is the source coordinate stream/shard/sequence
number, known only after Kinesis accepted the record.

``--aggregate N`` packs up to N consecutive records into one KPL aggregate
(awslabs' aggregator, :mod:`ops.aggregation`), as a KPL producer does;
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
(``python -m ops.producer --instance orders-eu-west-1 --count N``); without
it the events carry the default fields and both are required.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from botocore.exceptions import WaiterError

from infra.config import UndeclaredInstanceError, declared_instance
from model import aws_clients
from model.failure_record import record_key
from model.record import BAD_AGGREGATE, TOO_LARGE
from ops import kinesis_put
from ops.aggregation import aggregate
from ops.arguments import non_negative_float, non_negative_int, positive_int
from ops.arguments import share as share_type
from ops.events import (
    DEFAULT_FAILURE_KINDS,
    DEFAULT_SCHEMA,
    FAILURE_KINDS,
    EventSchema,
    MixSpec,
    SampleRecord,
    generate,
    now_utc,
)
from ops.kinesis_put import (
    DEFAULT_MAX_ATTEMPTS,
    MAX_RECORDS_PER_CALL,
    Stored,
    chunks,
    put_entries,
)

# The repository's cdk.json: where --instance finds an instance's schema.
CDK_JSON: Final = Path(__file__).resolve().parents[1] / "cdk.json"
# Every Kinesis call of the producer: bounded, with botocore's own retries on
# top of the per-entry re-sends below.
PRODUCER_LIMITS: Final = aws_clients.ClientLimits(
    connect_timeout_sec=5, read_timeout_sec=30, retries=5
)
# Stream status checks while waiting for ACTIVE (the StreamExists waiter).
_STREAM_POLL_SEC: Final = 1


class ProduceError(RuntimeError):
    """Records Kinesis kept rejecting after every attempt."""


@dataclass(frozen=True)
class Placed:
    """A record Kinesis accepted, and where it put it; ``sub_sequence_number``
    is its index in the KPL aggregate it went in (None: sent as is)."""

    record: SampleRecord
    shard_id: str
    sequence_number: str
    sub_sequence_number: int | None = None


@dataclass(frozen=True)
class Packed:
    """What one PutRecords entry of the producer carries: one record as is, or
    a KPL aggregate of several (``aggregated``)."""

    members: tuple[SampleRecord, ...]
    aggregated: bool


def _entry(data: bytes, key: str, members: tuple[SampleRecord, ...], aggregated: bool) -> Entry:
    return Entry(data, key, Packed(members, aggregated))


Entry = kinesis_put.Entry[Packed]


@dataclass
class ProduceReport:
    stream: str
    placed: list[Placed] = field(default_factory=list)
    calls: int = 0
    retried_entries: int = 0
    seconds: float = 0.0
    kinesis_records: int = 0
    aggregates: int = 0

    def add(self, stored: Stored[Packed]) -> None:
        """One stored entry: one Kinesis record, and each user record it carries."""
        packed = stored.entry.source
        self.kinesis_records += 1
        self.aggregates += packed.aggregated
        self.placed.extend(
            Placed(
                member,
                stored.shard_id,
                stored.sequence_number,
                index if packed.aggregated else None,
            )
            for index, member in enumerate(packed.members)
        )

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(p.record.kind for p in self.placed).items()))

    def expected_ids(self) -> set[str]:
        return {
            p.record.event_id
            for p in self.placed
            if p.record.event_id is not None and not p.record.is_failure
        }

    def expected_failures(self) -> dict[str, str]:
        """Failure-topic key -> reason, for every malformed record produced.
        Raises if two share a key: the count would hide a lost one."""
        out: dict[str, str] = {}
        for p in self.placed:
            if not p.record.is_failure:
                continue
            key = record_key(self.stream, p.shard_id, p.sequence_number, p.sub_sequence_number)
            if key in out:
                raise ValueError(f"two failure records share the failure key {key}")
            out[key] = p.record.kind
        return out

    def records_by_shard(self) -> dict[str, int]:
        return dict(sorted(Counter(p.shard_id for p in self.placed).items()))

    def last_sequence_by_shard(self) -> dict[str, str]:
        last: dict[str, str] = {}
        for p in self.placed:
            if p.shard_id not in last or int(p.sequence_number) > int(last[p.shard_id]):
                last[p.shard_id] = p.sequence_number
        return last

    def to_dict(self, *, full: bool = True) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "stream": self.stream,
            "records": len(self.placed),
            "kinesis_records": self.kinesis_records,
            "aggregates": self.aggregates,
            "aggregated_records": sum(p.sub_sequence_number is not None for p in self.placed),
            "counts": self.counts(),
            "unique_valid_ids": len(self.expected_ids()),
            "records_by_shard": self.records_by_shard(),
            "calls": self.calls,
            "retried_entries": self.retried_entries,
            "seconds": round(self.seconds, 3),
            "records_per_second": round(len(self.placed) / self.seconds, 1)
            if self.seconds
            else None,
        }
        if full:
            summary["ids"] = sorted(self.expected_ids())
            summary["failures"] = dict(sorted(self.expected_failures().items()))
            summary["last_sequence_by_shard"] = self.last_sequence_by_shard()
        return summary


def plan_entries(
    records: Sequence[SampleRecord], aggregate_size: int = 0, share: float = 1.0
) -> list[Entry]:
    """The PutRecords entries of ``records``, in order: groups of up to
    ``aggregate_size`` consecutive records, ``share`` of the groups packed into
    one KPL aggregate each (deterministic: group k is packed when
    ``floor((k+1)*share) > floor(k*share)``), the others sent record by record.
    A ``bad_aggregate`` record is never packed (it stands for a corrupt
    aggregate itself)."""
    if aggregate_size < 0:
        raise ValueError(f"aggregate={aggregate_size}: must be >= 0")
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"aggregate_share={share}: must be between 0 and 1")
    if aggregate_size == 0:
        return [_entry(r.data, r.partition_key, (r,), False) for r in records]
    entries: list[Entry] = []
    group: list[SampleRecord] = []
    groups = 0

    def flush() -> None:
        nonlocal groups
        if not group:
            return
        packed = math.floor((groups + 1) * share) > math.floor(groups * share)
        groups += 1
        if packed:
            key = group[0].partition_key
            data = aggregate(key, [r.data for r in group])
            entries.append(_entry(data, key, tuple(group), True))
        else:
            entries.extend(_entry(r.data, r.partition_key, (r,), False) for r in group)
        group.clear()

    for record in records:
        if record.kind == BAD_AGGREGATE:
            flush()
            entries.append(_entry(record.data, record.partition_key, (record,), False))
            continue
        group.append(record)
        if len(group) == aggregate_size:
            flush()
    flush()
    return entries


def put_all(
    client: Any,
    stream: str,
    records: Sequence[SampleRecord],
    *,
    rate: float = 0.0,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    on_progress: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    aggregate_size: int = 0,
    aggregate_share: float = 1.0,
) -> ProduceReport:
    """Send every record; ``rate`` > 0 caps Kinesis records (PutRecords
    entries) per second over the run; ``aggregate_size``/``aggregate_share``:
    :func:`plan_entries`."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts={max_attempts}: must be >= 1")
    entries = plan_entries(records, aggregate_size, aggregate_share)
    report = ProduceReport(stream)
    started = time.monotonic()
    sent = 0
    # A rate caps each request too, so that the pace is smooth within a second.
    per_call = MAX_RECORDS_PER_CALL if rate <= 0 else max(1, min(MAX_RECORDS_PER_CALL, int(rate)))
    for batch in chunks(entries, max_records=per_call):
        if rate > 0:
            ahead = sent / rate - (time.monotonic() - started)
            if ahead > 0:
                sleep(ahead)
        outcome = put_entries(client, stream, batch, max_attempts=max_attempts, sleep=sleep)
        report.calls += outcome.calls
        report.retried_entries += outcome.retried_entries
        for stored in outcome.stored:
            report.add(stored)
        if outcome.failed:
            raise ProduceError(
                f"{len(outcome.failed)} records still rejected by {stream} after {max_attempts} "
                f"attempts; first error: {outcome.last_error}"
            )
        sent += len(batch)
        if on_progress is not None:
            on_progress(sent)
    report.seconds = time.monotonic() - started
    return report


def kinesis_client(
    region: str, endpoint_url: str | None = None, credentials: Mapping[str, str] | None = None
) -> Any:
    """A client with bounded timeouts and retries (no call may hang a run).

    ``credentials`` (``AWS_ACCESS_KEY_ID``-style keys) pins them, e.g. the
    emulators' fake ones; without, boto3's default chain applies (real AWS).
    """
    return aws_clients.client(
        "kinesis",
        PRODUCER_LIMITS,
        region=region,
        endpoint_url=endpoint_url,
        credentials=client_credentials(credentials),
    )


def client_credentials(credentials: Mapping[str, str] | None) -> dict[str, str]:
    """boto3.client keyword arguments from environment-style credential names."""
    if not credentials:
        return {}
    names = {
        "AWS_ACCESS_KEY_ID": "aws_access_key_id",
        "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
        "AWS_SESSION_TOKEN": "aws_session_token",
    }
    return {names[k]: v for k, v in credentials.items() if k in names}


def ensure_stream(client: Any, stream: str, shard_count: int | None, timeout: float = 60) -> None:
    """Create the stream if absent (``shard_count`` None: on-demand) and wait for ACTIVE."""
    try:
        client.describe_stream_summary(StreamName=stream)
    except client.exceptions.ResourceNotFoundException:
        if shard_count is None:
            client.create_stream(StreamName=stream, StreamModeDetails={"StreamMode": "ON_DEMAND"})
        else:
            client.create_stream(StreamName=stream, ShardCount=shard_count)
    attempts = max(1, math.ceil(timeout / _STREAM_POLL_SEC))
    try:
        client.get_waiter("stream_exists").wait(
            StreamName=stream, WaiterConfig={"Delay": _STREAM_POLL_SEC, "MaxAttempts": attempts}
        )
    except WaiterError as exc:
        raise TimeoutError(f"stream {stream} not ACTIVE within {timeout:.0f}s: {exc}") from exc


def add_mix_arguments(parser: argparse.ArgumentParser, *, id_prefix: str = "evt") -> None:
    """The options of the event mix and its pace: shared by ``python -m
    ops.producer`` and ``python -m scripts.produce`` (``make produce``)."""
    parser.add_argument(
        "--count", type=non_negative_int, default=5000, help="records to put (default 5000)"
    )
    parser.add_argument(
        "--rate",
        type=non_negative_float,
        default=0.0,
        help="max records per second (default 0: unthrottled)",
    )
    parser.add_argument("--malformed-share", type=share_type, default=0.02, help="default 0.02")
    parser.add_argument("--duplicate-share", type=share_type, default=0.05, help="default 0.05")
    parser.add_argument(
        "--nanos",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="occurredAt with 9 fractional digits and an offset (default on)",
    )
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
    parser.add_argument("--seed", type=int, default=7, help="RNG seed (default 7)")
    parser.add_argument(
        "--id-prefix", default=id_prefix, help=f"prefix of event ids (default {id_prefix})"
    )
    parser.add_argument("--report", type=Path, help="write the full report (ids, keys) as JSON")
    add_aggregate_arguments(parser)


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
        prog="python -m ops.producer",
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


def produce_as_asked(
    client: Any, stream: str, spec: MixSpec, args: argparse.Namespace
) -> ProduceReport:
    """:func:`produce_mix` paced and aggregated as the flags of
    :func:`add_mix_arguments` ask (``--rate``, ``--aggregate``, ``--aggregate-share``)."""
    return produce_mix(
        client,
        stream,
        spec,
        rate=args.rate,
        aggregate_size=args.aggregate,
        aggregate_share=args.aggregate_share,
    )


def produce_mix(
    client: Any,
    stream: str,
    spec: MixSpec,
    *,
    rate: float = 0.0,
    start: datetime | None = None,
    aggregate_size: int = 0,
    aggregate_share: float = 1.0,
) -> ProduceReport:
    """Generate the mix of ``spec`` (valid events in the minute before ``start``,
    default now) and put every record: ``generate`` and ``put_all``, the two
    functions ``make run`` uses for each instance."""
    return put_all(
        client,
        stream,
        generate(spec, start or now_utc()),
        rate=rate,
        aggregate_size=aggregate_size,
        aggregate_share=aggregate_share,
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
        report = produce_as_asked(client, stream, spec, args)
    except ProduceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.report:
        write_report(report, args.report)
    print(json.dumps(report.to_dict(full=False), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
