"""One instance of the pipeline on this machine: its resources, its job, its figures.

Shared by ``make run`` (:mod:`local.__main__`) and the end-to-end suite:
both create the instance's stream and failure topic from the same instance
configuration the CDK app reads (``cdk.json``), build the job's config with
the same function the stack uses, run the job as a child process, and read
back what it made. Each instance gets its own directory (checkpoint,
warehouse, Derby metastore, stop marker, logs), so two instances side by side
share nothing but the emulators, as two stacks share nothing but the account.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from infra.config import load_instances, read_cdk_context
from infra.job_config import job_config_for
from infra.schema_change import check_schema_change
from local import checkpoint_files
from local.efo_endpoint import read_stats
from local.emulators import Endpoints
from local.failures import TopicContents, ensure_topic, read_topic
from local.job_process import JobProcess, clear_stop_marker
from local.metrics import PublishedMetrics, cloudwatch_client, read_published
from local.observation import Observation
from local.serverless_launch import start_job_process
from local.summary import RunFigures, Summary, source_line, summarize
from local.table import TableFigures, figures, read_rows, sql_catalog
from model import contract
from model.config import JobConfig
from model.exit_record import ExitRecord, ExitRecordError, read_exit_record
from model.lease import JobState, file_lease_state, lease_path
from model.polling import poll_until, wait_for
from model.record import column_name
from producer.events import EventSchema
from producer.local_run import (
    FAKE_CREDENTIALS,
    JOB_CONFIG_FILE,
    PRODUCED_DIR,
    OutsideProduce,
    read_outside,
)
from producer.stream_writer import ProduceReport, ensure_stream, kinesis_client, put_all

# An on-demand stream has no shard count in the config; moto creates 4 shards
# for ON_DEMAND, as Kinesis does.
CDK_JSON: Final = Path(__file__).resolve().parents[1] / "cdk.json"


def load_example_instances(cdk_json: Path = CDK_JSON) -> list[Any]:
    """The instances ``cdk synth`` would build, from the same file."""
    return list(load_instances(read_cdk_context(cdk_json)))


def select_instances(declared: Sequence[Any], wanted: Sequence[str]) -> list[Any]:
    """``orders-ap-northeast-2`` picks that instance; a bare domain (``orders``)
    picks the first declared instance of that domain. Empty: the first one."""
    if not wanted:
        return [declared[0]]
    chosen: list[Any] = []
    for name in wanted:
        match = next((i for i in declared if i.instance_id == name), None)
        if match is None:
            match = next((i for i in declared if i.domain == name), None)
        if match is None:
            allowed = ", ".join(i.instance_id for i in declared)
            raise ValueError(
                f"--instances: {name!r} is not a declared instance; allowed: {allowed}"
            )
        if match in chosen:
            raise ValueError(f"--instances: {name!r} selects {match.instance_id} twice")
        chosen.append(match)
    return chosen


def build_job_config(
    instance: Any,
    root: Path,
    endpoints: Endpoints,
    overrides: Mapping[str, Any] | None = None,
) -> JobConfig:
    """The instance's job config as the stack builds it, pointed at the emulators
    and at ``root``; ``overrides`` replaces top-level fields (e.g. a short
    trigger interval or lease for tests)."""
    config: JobConfig = job_config_for(
        instance,
        checkpoint_location=str(root / "checkpoint"),
        kafka_bootstrap_servers=endpoints.kafka_bootstrap,
        kafka_security="PLAINTEXT",
        database_location=str(root / "warehouse" / f"{instance.database_name}.db"),
        stop_marker_path=str(root / "stop"),
        aws_endpoint_url=endpoints.aws_url,
        source_format="python-kinesis",
    )
    config = replace_fields(config, {"catalog": sql_catalog(root), **(overrides or {})})
    if config.source.consumer_type == "SubscribeToShard" and endpoints.kinesis_efo_url:
        # Enhanced fan-out: Kinesis through the SubscribeToShard front (moto has
        # none); S3 and CloudWatch stay on moto itself.
        config = replace_fields(config, {"kinesis_endpoint_url": endpoints.kinesis_efo_url})
    return config


def register_stack_consumer(kinesis: Any, stream_name: str, consumer_name: str) -> str:
    """The enhanced fan-out consumer the stack would own
    (``AWS::Kinesis::StreamConsumer``, infra/constructs/stream.py), registered
    on the emulator once (idempotent across runs on the same moto): its ARN."""
    stream_arn = kinesis.describe_stream_summary(StreamName=stream_name)[
        "StreamDescriptionSummary"
    ]["StreamARN"]
    try:
        found = kinesis.describe_stream_consumer(StreamARN=stream_arn, ConsumerName=consumer_name)
        return str(found["ConsumerDescription"]["ConsumerARN"])
    except kinesis.exceptions.ResourceNotFoundException:
        made = kinesis.register_stream_consumer(StreamARN=stream_arn, ConsumerName=consumer_name)
        return str(made["Consumer"]["ConsumerARN"])


def replace_fields(config: JobConfig, overrides: Mapping[str, Any]) -> JobConfig:
    """``dataclasses.replace`` that also takes nested ``{"source": {...}}`` dicts,
    re-validated through ``JobConfig.from_dict``."""
    raw = config.to_dict()
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(raw.get(key), dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    return JobConfig.from_dict(raw)


@dataclass
class LocalInstance:
    """One instance's resources and job on the emulators."""

    instance: Any
    root: Path
    endpoints: Endpoints
    config: JobConfig
    shard_count: int | None
    reports: list[ProduceReport] = field(default_factory=list)
    job: JobProcess | None = None
    all_jobs: list[JobProcess] = field(default_factory=list)
    runs: int = 0
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    # What the job config was built with besides the instance (build_job_config).
    overrides: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(
        cls,
        instance: Any,
        root: Path,
        endpoints: Endpoints,
        *,
        overrides: Mapping[str, Any] | None = None,
        shard_count: int | None = None,
    ) -> LocalInstance:
        """Build the config and create the stream and the topic (idempotent)."""
        root.mkdir(parents=True, exist_ok=True)
        config = build_job_config(instance, root, endpoints, overrides)
        shards = shard_count if shard_count is not None else instance.stream.shard_count
        local = cls(instance, root, endpoints, config, shards, overrides=dict(overrides or {}))
        ensure_stream(local.kinesis, config.stream_name, shards)
        if config.source.consumer_type == "SubscribeToShard" and config.source.consumer_name:
            # As the stack does (AWS::Kinesis::StreamConsumer): the job gets
            # the consumer's ARN and never registers one.
            arn = register_stack_consumer(
                local.kinesis, config.stream_name, config.source.consumer_name
            )
            source = {**local.overrides.get("source", {}), "consumer_arn": arn}
            local.overrides["source"] = source
            local.config = replace_fields(config, {"source": source})
        ensure_topic(
            endpoints.kafka_bootstrap,
            config.kafka.topic,
            instance.kafka.topic_partitions,
            max_message_bytes=config.kafka.max_message_bytes,
        )
        return local

    # ------------------------------------------------------------------ paths

    @property
    def name(self) -> str:
        return self.config.instance_id

    @property
    def table_location(self) -> Path:
        return Path(self.config.database_location or self.root / "warehouse") / self.config.table

    @property
    def id_column(self) -> str:
        """The table column of the event id (``id_field``, as the job names it)."""
        return column_name(self.config.id_field)

    @property
    def schema(self) -> EventSchema:
        """The fields this instance's events carry (its ``job.event_fields``):
        what its producer must send for the job to accept them."""
        return EventSchema.of(self.config)

    @property
    def checkpoint(self) -> Path:
        return Path(self.config.checkpoint_location)

    @property
    def log_path(self) -> Path:
        return self.root / "job.log"

    @property
    def kinesis(self) -> Any:
        return kinesis_client(self.config.region, self.endpoints.aws_url, FAKE_CREDENTIALS)

    # ------------------------------------------------------------- producing

    def produce(
        self,
        records: Sequence[Any],
        *,
        rate: float = 0.0,
        aggregate_size: int = 0,
        aggregate_share: float = 1.0,
        on_progress: Callable[[int], None] | None = None,
    ) -> ProduceReport:
        """Put ``records``; ``aggregate_size``/``aggregate_share``: KPL
        aggregation (:func:`producer.producer.plan_entries`); ``on_progress``: the
        records sent so far (:func:`producer.producer.put_all`)."""
        report = put_all(
            self.kinesis,
            self.config.stream_name,
            records,
            rate=rate,
            aggregate_size=aggregate_size,
            aggregate_share=aggregate_share,
            on_progress=on_progress,
        )
        self.reports.append(report)
        return report

    @property
    def produced(self) -> list[Any]:
        return [p for r in self.reports for p in r.placed]

    def outside(self) -> list[OutsideProduce]:
        """What ``make produce --work-dir`` put into this run from outside
        (:func:`producer.local_run.produced_dir`): accepted and counted."""
        return read_outside(self.root / PRODUCED_DIR)

    def expected_ids(self) -> set[str]:
        own = {i for r in self.reports for i in r.expected_ids()}
        return own.union(*(o.ids for o in self.outside() if o.done))

    def expected_failures(self) -> dict[str, str]:
        own = {k: v for r in self.reports for k, v in r.expected_failures().items()}
        for produce in self.outside():
            if produce.done:
                own.update(produce.failures)
        return own

    # ------------------------------------------------------------------ job

    def start_job(self) -> JobProcess:
        if self.job is not None and self.job.running:
            raise RuntimeError(f"{self.name}: job already running (pid {self.job.pid})")
        clear_stop_marker(self.config)
        self.runs += 1
        # A serverless instance launches from its job run.
        self.job = start_job_process(
            self.instance, self.config, self.root / JOB_CONFIG_FILE, self.log_path
        )
        self.all_jobs.append(self.job)
        return self.job

    def start_second_copy(self) -> JobProcess:
        """Another job process on the same config, while the first runs."""
        copy = start_job_process(
            self.instance, self.config, self.root / JOB_CONFIG_FILE, self.root / "job-copy.log"
        )
        self.all_jobs.append(copy)
        return copy

    def redeploy(self, instance: Any, timeout: float = 120.0) -> JobProcess:
        """A new version of the instance (e.g. from an edited copy of
        ``cdk.json``) takes over as ``make redeploy`` hands over on EMR: synth's
        schema check first (an event schema a deploy may not make stops here),
        then the old job stops gracefully (stop marker, exit 0) before the new
        one starts on the same checkpoint and table."""
        if instance.instance_id != self.instance.instance_id:
            raise ValueError(f"redeploy {self.name}: got instance {instance.instance_id}")
        check_schema_change(
            instance.instance_id, instance.seed_schema(), instance.declared_schema()
        )
        config = build_job_config(instance, self.root, self.endpoints, self.overrides)
        if self.job is not None and self.job.running:
            code = self.stop_job(timeout)
            if code != 0:
                raise RuntimeError(f"{self.name}: the old job exited {code}\n{self.log_tail()}")
        self.instance, self.config = instance, config
        return self.start_job()

    def stop_job(self, timeout: float = 120.0) -> int:
        if self.job is None:
            raise RuntimeError(f"{self.name}: no job started")
        return self.job.stop(timeout)

    def lease(self) -> JobState:
        """Whether a copy of the job holds the instance's lease: the harness's
        own child, or one ``make start-job --work-dir`` started outside it."""
        return file_lease_state(Path(lease_path(self.config.checkpoint_location)))

    @property
    def job_running(self) -> bool:
        return (self.job is not None and self.job.running) or self.lease().running

    def exit_record(self) -> ExitRecord | None:
        """The job's last exit record (job/outcome.py), None if none or unreadable."""
        try:
            return read_exit_record(self.config.checkpoint_location)
        except ExitRecordError:
            return None

    def stopped_by_operator(self) -> bool:
        """The job is down, and its exit record says an operator stopped it
        (``make stop-job``, a signal): not a failure of the run."""
        record = self.exit_record()
        return (
            not self.job_running
            and record is not None
            and record.reason == contract.EXIT_STOPPED_ON_REQUEST
            and record.stopped_by == contract.STOP_BY_OPERATOR
        )

    def stop_any_job(self, timeout: float = 120.0) -> int | None:
        """Stop whichever job holds the lease, gracefully (the stop marker):
        the harness's own child (its exit code), or one started outside it
        (the code its exit record gives). None: no job was running."""
        if self.job is not None and self.job.running:
            return self.job.stop(timeout)
        if not self.lease().running:
            return None
        if self.config.stop_marker_path is None:
            raise RuntimeError(f"{self.name}: config has no stop_marker_path")
        marker = Path(self.config.stop_marker_path)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("stop\n", encoding="utf-8")
        if not wait_for(lambda: not self.lease().running, timeout=timeout, interval=0.5):
            raise TimeoutError(f"job {self.name} still holds its lease after {timeout:.0f}s")
        record = self.exit_record()
        return record.code if record is not None else 1

    def kill_job(self) -> int:
        if self.job is None:
            raise RuntimeError(f"{self.name}: no job started")
        return self.job.kill()

    # ------------------------------------------------------------- progress

    def batches(self) -> int:
        return len(self.committed_batches())

    def checkpoint_offsets(self) -> dict[int, dict[str, Any]]:
        """Batch id -> the source offset Spark recorded for it."""
        return checkpoint_files.offsets(self.checkpoint)

    def query_id(self) -> str | None:
        """The streaming query's persistent id, or None before the first start wrote it."""
        return checkpoint_files.query_id(self.checkpoint)

    def committed_batches(self) -> set[int]:
        return checkpoint_files.committed_batches(self.checkpoint)

    def observe(self) -> Observation:
        expected = self.expected_ids()
        failures = self.expected_failures()
        seen_ids = set(self.table_ids()) & expected
        try:
            topic = read_topic(self.endpoints.kafka_bootstrap, self.config.kafka.topic, timeout=15)
            seen_failures = len(topic.keys & set(failures))
        except Exception:  # the broker may be down on purpose; progress is best effort
            seen_failures = 0
        return Observation(
            seconds=(datetime.now(UTC) - self.started_at).total_seconds(),
            batches=self.batches(),
            rows=len(seen_ids),
            failures=seen_failures,
            expected_rows=len(expected),
            expected_failures=len(failures),
            job_running=self.job_running,
            outside_pending=sum(not o.done for o in self.outside()),
        )

    def wait_until_accounted(
        self,
        timeout: float,
        *,
        interval: float = 2.0,
        on_progress: Callable[[Observation], None] | None = None,
        require_running: bool = True,
    ) -> Observation:
        """Poll until every produced record is in the table or on the topic."""
        latest: list[Observation] = []  # the last observation, for the timeout message

        def accounted() -> bool:
            seen = self.observe()
            latest[:] = [seen]
            if on_progress is not None:
                on_progress(seen)
            if seen.accounted:
                return True
            if require_running and self.job is not None and not self.job.running:
                raise JobExitedError(self, seen)
            return False

        poll_until(
            accounted,
            timeout=timeout,
            interval=interval,
            on_timeout=lambda: TimeoutError(
                f"{self.name}: not all records accounted for after {timeout:.0f}s: "
                f"{latest[0].line(self.name)}\n--- job log tail ---\n{self.log_tail()}"
            ),
        )
        return latest[0]

    def log_tail(self, lines: int = 40) -> str:
        return self.job.log_tail(lines) if self.job is not None else ""

    # ---------------------------------------------------------- final figures

    def read_table(self, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """The table's current snapshot (``columns``, default the id), read
        through the catalog; works while the job runs."""
        return read_rows(self.config, columns or (self.id_column,))

    def table_figures(self) -> TableFigures:
        return figures(self.config)

    def read_topic(self) -> TopicContents:
        return read_topic(self.endpoints.kafka_bootstrap, self.config.kafka.topic, timeout=60)

    def read_metrics(self) -> PublishedMetrics:
        client = cloudwatch_client(self.config.region, self.endpoints.aws_url)
        return read_published(client, self.name, self.started_at, datetime.now(UTC))

    def table_ids(self) -> list[str]:
        """Every id in the table, duplicates included."""
        return [str(r[self.id_column]) for r in self.read_table()]

    def summary(self, table_ids: Sequence[str] | None = None) -> Summary:
        ids = table_ids if table_ids is not None else self.table_ids()
        table = self.table_figures()
        topic = self.read_topic()
        try:
            metrics = self.read_metrics()
        except Exception:  # metrics are reported, never a reason to lose the verdict
            metrics = PublishedMetrics()
        served: int | None = None
        if (
            self.config.source.consumer_type == "SubscribeToShard"
            and self.endpoints.kinesis_efo_url
        ):
            try:
                served = read_stats(self.endpoints.kinesis_efo_url)["served"]
            except OSError:  # the figure is reported, never a reason to lose the verdict
                served = None
        outside = [o for o in self.outside() if o.done]
        by_kind: dict[str, int] = {}
        for counts in [r.counts() for r in self.reports] + [o.counts for o in outside]:
            for kind, n in counts.items():
                by_kind[kind] = by_kind.get(kind, 0) + n
        outside_records = sum(o.records for o in outside)
        figures = RunFigures(
            instance=self.name,
            produced_records=len(self.produced) + outside_records,
            outside_records=outside_records,
            produced_by_kind=by_kind,
            produced_kinesis_records=sum(r.kinesis_records for r in self.reports)
            + sum(o.kinesis_records for o in outside),
            produced_aggregates=sum(r.aggregates for r in self.reports)
            + sum(o.aggregates for o in outside),
            expected_ids=frozenset(self.expected_ids()),
            expected_failures=self.expected_failures(),
            table_ids=ids,
            table_snapshots=table.snapshots,
            table_data_files=table.data_files,
            topic_reasons_by_key=topic.reasons_by_key,
            topic_records=topic.records,
            batch_durations_ms=metrics.batch_durations_ms,
            batches=self.batches(),
            metrics_published=metrics.datapoints,
            seconds=(datetime.now(UTC) - self.started_at).total_seconds(),
            source=source_line(
                self.config.source.format,
                self.config.source.consumer_type,
                self.config.source.consumer_name,
                served,
            ),
            fan_out_subscriptions=served,
        )
        return summarize(figures)

    def write_summary(self, summary: Summary) -> Path:
        path = self.root / "summary.json"
        path.write_text(summary.to_json(), encoding="utf-8")
        return path


class JobExitedError(RuntimeError):
    def __init__(self, local: LocalInstance, seen: Observation) -> None:
        code = local.job.returncode if local.job is not None else None
        super().__init__(
            f"{local.name}: the job exited (code {code}) before all records were accounted "
            f"for: {seen.line(local.name)}\n--- job log tail ---\n{local.log_tail()}"
        )
        self.returncode = code
