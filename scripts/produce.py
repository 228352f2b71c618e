"""Put sample events on an instance's stream: ``make produce INSTANCE=<id> ARGS=...``.

The sample producer of ``make run`` (:mod:`producer.events` for the mix,
:func:`producer.producer.put_all` for the sending: at most 500 records and 5 MiB
per PutRecords call, rejected entries re-sent with a bounded backoff), aimed
at an instance instead of a stream name:

* ``--work-dir DIR``: a local run's stream, on that run's moto server (the
  endpoint from the run's job config, ``DIR/<instance>/job.json``); while
  ``make run`` runs, it accepts these records and counts them in its
  summary: this command records what it sends in
  ``DIR/<instance>/produced/`` (:mod:`producer.local_run`), and the run waits
  for it before it stops;
* otherwise the instance's stream on AWS (name and region from ``cdk.json``,
  credentials from boto3's default chain); ``--endpoint-url`` overrides.

Event ids default to a prefix unique to the invocation
(``<domain>-<UTC time>``): the job de-duplicates by id, so two runs with the
same prefix and seed would put the same events and the second would land
nothing. ``--aggregate N`` packs up to N events per Kinesis record in the KPL
aggregated format (``--aggregate-share`` of the groups). Prints the summary as
JSON; ``--report`` writes the full report (every id, every failure key, the
last sequence number per shard).

Exit codes: 0 every record accepted, 1 records still rejected after the last
attempt, 2 bad arguments, unknown instance or unreachable endpoint.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final

from model import aws_clients
from producer import local_run
from producer.events import EventSchema, MixSpec, generate, now_utc
from producer.producer import add_mix_arguments, put_as_asked, spec_from_args, write_report
from producer.stream_writer import PRODUCER_LIMITS, ProduceError, ProduceReport, plan_entries
from scripts.command import EXIT_USAGE, OperatorError, declared_instance, run_command
from scripts.status.target import Target, local_config_path, parse_config, target_arguments

EXIT_OK: Final = 0
EXIT_REJECTED: Final = 1
AUTO_PREFIX: Final = "auto"


def default_id_prefix(domain: str, now: datetime) -> str:
    """Unique per invocation (to the second), readable in the table."""
    return f"{domain}-{now:%Y%m%d%H%M%S}"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.produce", description=__doc__.split("\n")[0]
    )
    target_arguments(p)
    add_mix_arguments(p, id_prefix=AUTO_PREFIX)
    return p


def stream_target(args: argparse.Namespace) -> tuple[str, Any, EventSchema]:
    """(stream, Kinesis client, event schema) of the instance, locally or on
    AWS: the events follow the instance's own ``job.event_fields``."""
    if args.work_dir is not None:
        path = local_config_path(args.work_dir, args.instance)
        config = parse_config(path.read_text(encoding="utf-8"), str(path), args.instance)
        target = Target(config, str(path), "", local=True, endpoint_url=args.endpoint_url)
        return config.stream_name, target.client("kinesis", PRODUCER_LIMITS), EventSchema.of(config)
    if args.config is not None:
        raise OperatorError(EXIT_USAGE, "--config: not used by produce (the stream is in cdk.json)")
    declared = declared_instance(args.instance, args.cdk_json)
    client = aws_clients.client(
        "kinesis", PRODUCER_LIMITS, region=declared.region, endpoint_url=args.endpoint_url
    )
    return declared.stream_name, client, EventSchema.of(declared.job)


def produce_into_run(
    args: argparse.Namespace, kinesis: Any, stream: str, spec: MixSpec
) -> ProduceReport:
    """Put the mix into a local run, recording it where the run reads it
    (:func:`producer.local_run.produced_dir`): "producing" with the ids about to be
    sent, then "done" with what was sent. A ``make run`` under way waits for
    it and counts its records (local/harness.py), instead of failing on ids
    it did not produce itself."""
    records = generate(spec, now_utc())
    directory = local_run.produced_dir(args.work_dir, args.instance)
    name = f"{spec.id_prefix}-{os.getpid()}"
    ids = frozenset(r.event_id for r in records if r.event_id is not None and not r.is_failure)
    local_run.write_outside(directory, local_run.OutsideProduce(name, done=False, ids=ids))
    done = local_run.OutsideProduce(name, done=True, ids=ids, records=len(records))
    try:
        report = put_as_asked(kinesis, stream, records, args)
        done = local_run.OutsideProduce(
            name,
            done=True,
            ids=frozenset(report.expected_ids()),
            failures=report.expected_failures(),
            records=len(report.placed),
            counts=report.counts(),
            kinesis_records=report.kinesis_records,
            aggregates=report.aggregates,
        )
    finally:  # a failed put still ends the record: the run stops waiting for it
        local_run.write_outside(directory, done)
    return report


def produce(args: argparse.Namespace, out: Any) -> int:
    if args.id_prefix == AUTO_PREFIX:
        args.id_prefix = default_id_prefix(args.instance.split("-", 1)[0], datetime.now(UTC))
    stream, kinesis, schema = stream_target(args)
    try:
        spec = spec_from_args(args, schema)
        plan_entries([], args.aggregate, args.aggregate_share)  # validates both
    except ValueError as exc:
        raise OperatorError(EXIT_USAGE, str(exc)) from exc
    try:
        kinesis.describe_stream_summary(StreamName=stream)
    except kinesis.exceptions.ResourceNotFoundException as exc:
        raise OperatorError(EXIT_USAGE, f"stream {stream}: not found") from exc
    try:
        if args.work_dir is not None:
            report = produce_into_run(args, kinesis, stream, spec)
        else:
            report = put_as_asked(kinesis, stream, generate(spec, now_utc()), args)
    except ProduceError as exc:
        print(f"produce: {exc}", file=sys.stderr)
        return EXIT_REJECTED
    if args.report:
        write_report(report, args.report)
    summary = report.to_dict(full=False)
    summary["id_prefix"] = spec.id_prefix
    summary["last_sequence_by_shard"] = report.last_sequence_by_shard()
    print(json.dumps(summary, indent=1), file=out)
    return EXIT_OK


def main(argv: Sequence[str] | None = None, out: Any = None) -> int:
    args = parser().parse_args(argv)
    return run_command("produce", lambda: produce(args, out or sys.stdout))


if __name__ == "__main__":
    sys.exit(main())
