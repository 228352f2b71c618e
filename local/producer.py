"""Put sample events on a Kinesis stream: moto locally, or a real stream.

``python -m local.producer --stream S --region R --count N`` generates the
exact mix of :mod:`local.events` and sends it with ``PutRecords`` (at most
500 records and 5 MiB per call). Entries Kinesis rejects in a call (throttling,
internal errors) are re-sent with a bounded exponential backoff; a record that
still fails after the last attempt stops the run with an error, because a
producer that drops records silently would make every count downstream a lie.

What it prints (and writes with ``--report``) is what the job must produce:
the ids the table must hold, and the key and reason of every record that must
reach the failure topic. The key is the source coordinate stream/shard/sequence
number, known only after Kinesis accepted the record.
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

from app import aws_clients
from app.sinks.kafka import record_key
from app.transform import TOO_LARGE
from local.events import (
    DEFAULT_FAILURE_KINDS,
    FAILURE_KINDS,
    MixSpec,
    SampleRecord,
    generate,
    now_utc,
)

MAX_RECORDS_PER_CALL: Final = 500
MAX_BYTES_PER_CALL: Final = 5 * 1024 * 1024
DEFAULT_MAX_ATTEMPTS: Final = 8
_BACKOFF_BASE_SEC: Final = 0.1
_BACKOFF_CAP_SEC: Final = 5.0
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
    """A record Kinesis accepted, and where it put it."""

    record: SampleRecord
    shard_id: str
    sequence_number: str


@dataclass
class ProduceReport:
    stream: str
    placed: list[Placed] = field(default_factory=list)
    calls: int = 0
    retried_entries: int = 0
    seconds: float = 0.0

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(p.record.kind for p in self.placed).items()))

    def expected_ids(self) -> set[str]:
        return {
            p.record.event_id
            for p in self.placed
            if p.record.event_id is not None and not p.record.is_failure
        }

    def expected_failures(self) -> dict[str, str]:
        """Failure-topic key -> reason, for every malformed record produced."""
        return {
            record_key(self.stream, p.shard_id, p.sequence_number): p.record.kind
            for p in self.placed
            if p.record.is_failure
        }

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


def chunks(records: Sequence[SampleRecord]) -> list[list[SampleRecord]]:
    """Split into PutRecords calls: <= 500 records and <= 5 MiB (data + key) each."""
    calls: list[list[SampleRecord]] = []
    current: list[SampleRecord] = []
    size = 0
    for record in records:
        record_size = len(record.data) + len(record.partition_key.encode())
        if current and (
            len(current) == MAX_RECORDS_PER_CALL or size + record_size > MAX_BYTES_PER_CALL
        ):
            calls.append(current)
            current, size = [], 0
        current.append(record)
        size += record_size
    if current:
        calls.append(current)
    return calls


def backoff_seconds(attempt: int) -> float:
    """Exponential, capped: 0.1, 0.2, 0.4 ... 5 s."""
    return float(min(_BACKOFF_CAP_SEC, _BACKOFF_BASE_SEC * 2 ** (attempt - 1)))


def put_all(
    client: Any,
    stream: str,
    records: Sequence[SampleRecord],
    *,
    rate: float = 0.0,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    on_progress: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> ProduceReport:
    """Send every record; ``rate`` > 0 caps records per second over the run."""
    if max_attempts < 1:
        raise ValueError(f"max_attempts={max_attempts}: must be >= 1")
    report = ProduceReport(stream)
    started = time.monotonic()
    sent = 0
    batch_limit = MAX_RECORDS_PER_CALL if rate <= 0 else max(1, min(500, int(rate)))
    batches = [piece for call in chunks(records) for piece in _split(call, batch_limit) if piece]
    for batch in batches:
        if rate > 0:
            ahead = sent / rate - (time.monotonic() - started)
            if ahead > 0:
                sleep(ahead)
        pending = list(batch)
        for attempt in range(1, max_attempts + 1):
            response = client.put_records(
                StreamName=stream,
                Records=[{"Data": r.data, "PartitionKey": r.partition_key} for r in pending],
            )
            report.calls += 1
            failed: list[SampleRecord] = []
            errors: list[str] = []
            for record, entry in zip(pending, response["Records"], strict=True):
                if entry.get("ErrorCode"):
                    failed.append(record)
                    errors.append(f"{entry['ErrorCode']}: {entry.get('ErrorMessage', '')}")
                else:
                    report.placed.append(Placed(record, entry["ShardId"], entry["SequenceNumber"]))
            if not failed:
                break
            if attempt == max_attempts:
                raise ProduceError(
                    f"{len(failed)} records still rejected by {stream} after {max_attempts} "
                    f"attempts; first error: {errors[0]}"
                )
            report.retried_entries += len(failed)
            pending = failed
            sleep(backoff_seconds(attempt))
        sent += len(batch)
        if on_progress is not None:
            on_progress(sent)
    report.seconds = time.monotonic() - started
    return report


def _split(batch: list[SampleRecord], size: int) -> list[list[SampleRecord]]:
    return [batch[i : i + size] for i in range(0, len(batch), size)]


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
    from botocore.exceptions import WaiterError

    attempts = max(1, math.ceil(timeout / _STREAM_POLL_SEC))
    try:
        client.get_waiter("stream_exists").wait(
            StreamName=stream, WaiterConfig={"Delay": _STREAM_POLL_SEC, "MaxAttempts": attempts}
        )
    except WaiterError as exc:
        raise TimeoutError(f"stream {stream} not ACTIVE within {timeout:.0f}s: {exc}") from exc


def add_mix_arguments(parser: argparse.ArgumentParser, *, id_prefix: str = "evt") -> None:
    """The options of the event mix and its pace: shared by ``python -m
    local.producer`` and ``python -m scripts.produce`` (``make produce``)."""
    parser.add_argument("--count", type=int, default=5000, help="records to put (default 5000)")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="max records per second (default 0: unthrottled)"
    )
    parser.add_argument("--malformed-share", type=float, default=0.02, help="default 0.02")
    parser.add_argument("--duplicate-share", type=float, default=0.05, help="default 0.05")
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
        type=int,
        default=0,
        help=f"size of {TOO_LARGE} records (above the job's max_record_bytes)",
    )
    parser.add_argument("--seed", type=int, default=7, help="RNG seed (default 7)")
    parser.add_argument(
        "--id-prefix", default=id_prefix, help=f"prefix of event ids (default {id_prefix})"
    )
    parser.add_argument("--report", type=Path, help="write the full report (ids, keys) as JSON")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m local.producer",
        description="Put a known mix of sample events on a Kinesis stream (moto or real).",
    )
    parser.add_argument("--stream", required=True, help="Kinesis stream name")
    parser.add_argument("--region", required=True, help="AWS region of the stream")
    parser.add_argument("--endpoint-url", help="Kinesis endpoint (moto: http://127.0.0.1:PORT)")
    add_mix_arguments(parser)
    parser.add_argument(
        "--create", action="store_true", help="create the stream if absent (--shards)"
    )
    parser.add_argument("--shards", type=int, default=None, help="with --create; none: on-demand")
    return parser.parse_args(argv)


def spec_from_args(args: argparse.Namespace) -> MixSpec:
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
    )


def produce_mix(
    client: Any, stream: str, spec: MixSpec, *, rate: float = 0.0, start: datetime | None = None
) -> ProduceReport:
    """Generate the mix of ``spec`` (valid events in the minute before ``start``,
    default now) and put every record: ``generate`` and ``put_all``, the two
    functions ``make run`` uses for each instance."""
    return put_all(client, stream, generate(spec, start or now_utc()), rate=rate)


def write_report(report: ProduceReport, path: Path) -> None:
    """The full report (ids, failure keys, last sequence per shard) as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report.to_dict(), indent=1), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        spec = spec_from_args(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    client = kinesis_client(args.region, args.endpoint_url)
    if args.create:
        ensure_stream(client, args.stream, args.shards)
    try:
        report = produce_mix(client, args.stream, spec, rate=args.rate)
    except ProduceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.report:
        write_report(report, args.report)
    print(json.dumps(report.to_dict(full=False), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
