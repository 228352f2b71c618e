"""``main()``: config -> lease -> session -> query -> exit code.

One entry point for EMR (``spark-submit job/main.py --config s3://...``) and
the local run (``python -m job --config cfg.json --work-dir .work/x``).

Exit codes (the step is submitted with ``waitAppCompletion=false``, so on EMR a
dead job shows as the YARN application failing and the missing-heartbeat alarm
firing; locally and in tests the exit code is what is checked):

0  stopped on request (SIGTERM/SIGINT or the stop marker), between batches
1  the query failed (an exception in a batch; the cause is logged)
2  the configuration is invalid or unreadable (the message names the field), or
   the checkpoint holds state this job cannot resume (the old
   dropDuplicatesWithinWatermark operator's: the message names the checkpoint,
   what it holds and the fix, :mod:`model.checkpoint_state`)
3  another copy holds the instance's lease: refused to start
4  the lease was lost while running (another copy took it, or it expired)

Whatever the code, once the configuration is read the job also writes why it
stopped to ``<checkpoint>/_exit`` (:mod:`model.exit_record`, best effort): the
supervisor and ``make status`` read the reason there, not in the logs.

On EMR Serverless (``--platform serverless``, the job run's entry-point
arguments) the process ends exit 2 with status 0 instead: see
:func:`process_status`. Every other code, the lease, the stop marker and the
exit record are the same on both platforms.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from model import aws_clients, contract
from model.checkpoint_state import (
    CheckpointState,
    OldCheckpointError,
    check_resumable,
    inspect_checkpoint,
)
from model.config import ConfigError, JobConfig
from model.exit_record import ExitRecord, shorten, write_exit_record
from model.graceful_stop import StopMarker, StopRequest
from model.lease import LeaseHeldError, LeaseKeeper, make_lease
from model.polling import wait_for
from model.storage_uri import is_s3, parse_s3_uri

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from job.dedup_seed import Seed

log = logging.getLogger("job.driver")

EXIT_OK: Final = 0
EXIT_QUERY_FAILED: Final = 1
EXIT_BAD_CONFIG: Final = 2
EXIT_LEASE_HELD: Final = 3
EXIT_LEASE_LOST: Final = 4

PLATFORM_EMR: Final = "emr"
PLATFORM_SERVERLESS: Final = "serverless"
PLATFORMS: Final = (PLATFORM_EMR, PLATFORM_SERVERLESS)

# The reason a code means when nothing more precise is known (model.contract names).
REASON_OF_CODE: Final = {
    EXIT_OK: contract.EXIT_STOPPED_ON_REQUEST,
    EXIT_QUERY_FAILED: contract.EXIT_BATCH_FAILED,
    EXIT_BAD_CONFIG: contract.EXIT_CONFIG_REFUSED,
    EXIT_LEASE_HELD: contract.EXIT_LEASE_REFUSED,
    EXIT_LEASE_LOST: contract.EXIT_LEASE_LOST,
}


@dataclass
class Outcome:
    """Why the job is ending, filled in where that is known (the exception
    caught, the loop that saw the stop) and written as the exit record."""

    reason: str = ""
    detail: str = ""
    stopped_by: str | None = None

    def set(self, reason: str, detail: str, stopped_by: str | None = None) -> None:
        self.reason, self.detail, self.stopped_by = reason, detail, stopped_by

    def record(self, code: int) -> ExitRecord:
        reason = self.reason or REASON_OF_CODE.get(code, contract.EXIT_BATCH_FAILED)
        return ExitRecord(
            code=code,
            reason=reason,
            detail=shorten(self.detail),
            at=time.time(),
            owner=f"{socket.gethostname()}:{os.getpid()}",
            stopped_by=self.stopped_by if reason == contract.EXIT_STOPPED_ON_REQUEST else None,
        )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="app", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", required=True, help="job config JSON: a path or s3://bucket/key"
    )
    parser.add_argument(
        "--work-dir",
        help="local run: Derby metastore and warehouse go here (model.spark_conf.local_conf); "
        "default: the parent of a local checkpoint_location; unused on EMR (s3:// checkpoint)",
    )
    parser.add_argument(
        "--platform",
        choices=PLATFORMS,
        default=PLATFORM_EMR,
        help="where the job runs: emr (a step on a cluster; default) or serverless (an EMR "
        "Serverless job run: a refused configuration or checkpoint ends the run with status 0 "
        "so that the service does not retry it; the exit record keeps code 2)",
    )
    return parser.parse_args(argv)


def process_status(code: int, platform: str) -> int:
    """The process's exit status for the job's exit ``code`` on ``platform``.

    EMR Serverless retries a STREAMING job run that fails, up to
    ``retryPolicy.maxFailedAttemptsPerHour`` ("Job resiliency": "automatically
    restarts a job if it fails";
    https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/jobs-resiliency.html),
    and a Spark job run whose driver exits 0 ends in state SUCCESS ("Job run
    states": "Success: the job run has completed successfully";
    https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/job-states.html),
    which is not a failure and so not retried. A refused configuration or
    checkpoint (exit 2) cannot be cured by a restart, so on serverless it ends
    with status 0: the run shows SUCCESS, the service does not start it again,
    and the exit record (written before, code 2, reason config_refused or
    checkpoint_refused) is what tells the supervisor and ``make status`` why.
    Every other code is the process's status on both platforms: 1 and 4 (and 3)
    fail the run, which the service retries within its budget; 0 is a stop on
    request, left alone."""
    if platform == PLATFORM_SERVERLESS and code == EXIT_BAD_CONFIG:
        log.error(
            "exit %d (refused; see the exit record): ending the EMR Serverless job run with "
            "status 0 so that its retry policy does not start it again",
            code,
        )
        return EXIT_OK
    return code


def load_config(location: str, s3_client: Any = None) -> JobConfig:
    """A path or an ``s3://`` URI (the CDK app uploads the config beside the code)."""
    if not is_s3(location):
        try:
            return JobConfig.from_file(location)
        except OSError as exc:
            raise ConfigError(f"--config: cannot read {location}: {exc}") from exc
    bucket, key = parse_s3_uri(location)
    if s3_client is None:
        s3_client = aws_clients.client("s3", aws_clients.JOB_S3)
    try:
        body = s3_client.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as exc:
        raise ConfigError(f"--config: cannot read {location}: {exc}") from exc
    return JobConfig.from_json(body.decode("utf-8"), location)


def s3_client_for(config: JobConfig) -> Any:
    return aws_clients.client(
        "s3", aws_clients.JOB_S3, region=config.region, endpoint_url=config.s3_endpoint_url
    )


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("py4j", "botocore", "urllib3"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    args = parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        # No checkpoint is known yet, so no exit record: the log says why.
        log.error("invalid job configuration: %s", exc)
        return process_status(EXIT_BAD_CONFIG, args.platform)

    stop = StopRequest()
    stop.install()
    s3 = s3_client_for(config)
    return process_status(_main(config, args, stop, s3, Outcome()), args.platform)


def _main(
    config: JobConfig, args: argparse.Namespace, stop: StopRequest, s3: Any, outcome: Outcome
) -> int:
    """Lease, checkpoint check, session and query: the exit code. Why it ends
    (``outcome``) is written as the exit record while the lease is still held,
    so whoever sees the lease free also finds the record of that exit."""
    lease = make_lease(config.checkpoint_location, config.instance_id, config.lease_ttl_sec, s3)
    try:
        lease.acquire(config.lease_wait_sec)
    except LeaseHeldError as exc:
        log.error("%s", exc)
        outcome.set(contract.EXIT_LEASE_REFUSED, str(exc))
        write_exit_record(config.checkpoint_location, outcome.record(EXIT_LEASE_HELD), s3)
        return EXIT_LEASE_HELD
    keeper = LeaseKeeper(lease)
    keeper.start()
    log.info("instance %s: lease acquired by %s", config.instance_id, lease.owner)
    code = EXIT_QUERY_FAILED
    try:
        code = _under_lease(config, args, stop, s3, keeper=keeper, outcome=outcome)
        return code
    finally:
        keeper.stop()
        write_exit_record(config.checkpoint_location, outcome.record(code), s3)
        try:
            lease.release()
        except Exception as exc:  # the TTL frees it anyway
            log.warning("could not release the lease: %s", exc)


def _under_lease(
    config: JobConfig,
    args: argparse.Namespace,
    stop: StopRequest,
    s3: Any,
    *,
    keeper: LeaseKeeper,
    outcome: Outcome,
) -> int:
    try:
        # Before Spark starts: a checkpoint the query cannot resume stops here.
        checkpoint = checked_checkpoint(config, s3)
        # On EMR Serverless every Spark setting comes from spark-submit (the
        # application's spark-defaults and the run's parameters; locally
        # local/serverless_launch.py passes the local ones the same way).
        serverless = args.platform == PLATFORM_SERVERLESS
        spark = _session(config, None if serverless else local_work_dir(config, args.work_dir))
        try:
            return run(
                spark,
                config,
                stop=stop,
                keeper=keeper,
                s3_client=s3,
                checkpoint=checkpoint,
                outcome=outcome,
            )
        finally:
            spark.stop()
    except OldCheckpointError as exc:
        log.error("invalid job configuration: %s", exc)
        outcome.set(contract.EXIT_CHECKPOINT_REFUSED, str(exc))
        return EXIT_BAD_CONFIG
    except ConfigError as exc:
        log.error("invalid job configuration: %s", exc)
        outcome.set(contract.EXIT_CONFIG_REFUSED, str(exc))
        return EXIT_BAD_CONFIG
    except Exception as exc:
        log.exception("job failed")
        outcome.set(contract.EXIT_BATCH_FAILED, f"{type(exc).__name__}: {exc}")
        return EXIT_QUERY_FAILED


def local_work_dir(config: JobConfig, explicit: str | None) -> str | None:
    """Where a local run keeps Derby and the warehouse, or None on a cluster.

    ``--work-dir`` wins; otherwise a checkpoint on the local file system means a
    local run, and its parent directory is the work directory (the layout of
    ``local``: ``<root>/checkpoint`` beside ``<root>/metastore_db``). A
    checkpoint on ``s3://`` or ``hdfs://`` means EMR, where ``spark-defaults``
    already hold :func:`model.spark_conf.streaming_conf`.
    """
    if explicit:
        return explicit
    location = config.checkpoint_location
    scheme = location.split("://", 1)[0] if "://" in location else "file"
    if scheme != "file":
        return None
    return str(Path(location.removeprefix("file://")).resolve().parent)


def checked_checkpoint(config: JobConfig, s3_client: Any = None) -> CheckpointState:
    """The checkpoint's state, read under the lease; raises
    :class:`model.checkpoint_state.OldCheckpointError` (a ConfigError: exit 2)
    when it holds the old de-duplication operator's state."""
    location = config.checkpoint_location
    if s3_client is None and is_s3(location):
        s3_client = s3_client_for(config)
    state = inspect_checkpoint(location, s3_client)
    check_resumable(state, config.instance_id)
    if state.committed:
        log.info("checkpoint %s: resuming after batch %d", location, state.committed_batches[-1])
    else:
        log.info("checkpoint %s: no batch committed yet; the next batch is batch 0", location)
    return state


def seed_for(
    spark: SparkSession, table: Table, config: JobConfig, checkpoint: CheckpointState
) -> Seed | None:
    """The table's recent ids for a checkpoint whose batch 0 is still to run
    (:mod:`job.dedup_seed`); None once a batch is committed (Spark would ignore it)."""
    from job.dedup_seed import read_seed

    if checkpoint.committed:
        return None
    started = time.monotonic()
    seed = read_seed(spark, table, config, now=datetime.now(UTC))
    if seed is None:
        log.info("seed: 0 ids (nothing in the table arrived within the seed window)")
        return None
    log.info(
        "seed: %d ids from %d data files (arrived since %s), loaded by batch 0; %.1fs",
        seed.ids,
        seed.files,
        seed.cutoff.isoformat(timespec="seconds"),
        time.monotonic() - started,
    )
    return seed


def open_table(config: JobConfig) -> Table:
    """The events table at start, loaded once: the columns added since it was
    created applied (docs/infra.md, "Event schema"), then checked against the
    contract. A table that does not exist yet is created locally; on AWS
    :func:`job.table.catalog.ensure_table` says the stack must create it."""
    from pyiceberg.exceptions import NoSuchTableError

    from job.retry import with_retries
    from job.table.catalog import ensure_table, load_table, open_catalog
    from job.table.evolution import evolve_loaded

    catalog = with_retries(lambda: open_catalog(config), "open catalog", config.catalog)
    try:
        loaded = load_table(config, catalog)
    except NoSuchTableError:
        return ensure_table(config, catalog)
    evolve_loaded(loaded, config)
    return ensure_table(config, catalog, loaded=loaded)


def _session(config: JobConfig, work_dir: str | None) -> SparkSession:
    from job.session import build_session
    from model.spark_conf import local_conf

    conf = local_conf(work_dir) if work_dir else {}
    return build_session(conf, contract.app_name(config.instance_id))


def run(
    spark: SparkSession,
    config: JobConfig,
    *,
    stop: StopRequest,
    keeper: LeaseKeeper | None = None,
    s3_client: Any = None,
    checkpoint: CheckpointState | None = None,
    outcome: Outcome | None = None,
) -> int:
    """Start the query and supervise it until it fails or is asked to stop.

    ``checkpoint``: what :func:`checked_checkpoint` found (read here when not given)."""
    from job.micro_batch import BatchProcessor, prepare
    from job.monitoring import (
        BatchResults,
        CloudWatchPublisher,
        UndeclaredKeySeries,
        make_listener,
    )
    from job.sources import read_stream
    from model.kafka_settings import KafkaSettings, resolve_bootstrap_servers

    if checkpoint is None:
        checkpoint = checked_checkpoint(config, s3_client)
    check_stream_retention(config)
    table = open_table(config)
    seed = seed_for(spark, table, config, checkpoint)

    bootstrap = resolve_bootstrap_servers(config.kafka, region=config.region)
    kafka = KafkaSettings.for_job(config, bootstrap)
    results = BatchResults()
    publisher = None
    listener = None
    if config.metrics.enabled:
        publisher = CloudWatchPublisher.for_config(
            config.instance_id,
            config.region,
            config.metrics.endpoint_url,
            config.metrics.timeout_sec,
            config.metrics.max_attempts,
        )
        # Undeclared keys by name up to a bound, kept across restarts.
        key_series = UndeclaredKeySeries.stored(config.checkpoint_location, s3_client)
        listener = make_listener(
            publisher, results, config.trigger_interval_sec, key_series=key_series
        )
        spark.streams.addListener(listener)
    on_result = results.put if seed is None else _releasing(seed, results.put)
    processor = BatchProcessor(config, kafka, on_result=on_result, table=table)
    marker = StopMarker(config.stop_marker_path, s3_client) if config.stop_marker_path else None
    query = (
        prepare(read_stream(spark, config), config, seed=None if seed is None else seed.frame)
        .writeStream.queryName(f"events_{config.instance_id}".replace("-", "_"))
        .option("checkpointLocation", config.checkpoint_location)
        .trigger(processingTime=f"{config.trigger_interval_sec} seconds")
        .foreachBatch(processor)
        .start()
    )
    log.info("query %s started (checkpoint %s)", query.id, config.checkpoint_location)
    try:
        return supervise(query, config, stop=stop, keeper=keeper, marker=marker, outcome=outcome)
    finally:
        if listener is not None:
            # Bounded: the last batch's progress event is still on Spark's
            # listener bus right after the query stops (see make_listener).
            listener.terminated.wait(timeout=config.metrics.timeout_sec)
            spark.streams.removeListener(listener)
        if publisher is not None:
            publisher.close()
            log.info(
                "metrics: %d published, %d failed calls, %d dropped",
                publisher.published,
                publisher.failed_calls,
                publisher.dropped,
            )


def _releasing(seed: Seed, then: Any) -> Any:
    """``then``, after the first batch's result has also released the seed's
    cached rows: batch 0 has loaded them into the state store."""
    held = [True]

    def on_result(result: Any) -> None:
        if held[0]:
            held[0] = False
            seed.release()
        then(result)

    return on_result


def check_stream_retention(config: JobConfig, kinesis: Any = None) -> None:
    """The live stream's retention must not exceed the de-duplication horizon
    (see ``JobConfig.dedup_horizon_hours``): someone may have raised it outside
    the stack. ``RetentionPeriodHours`` from DescribeStreamSummary
    (https://docs.aws.amazon.com/kinesis/latest/APIReference/API_StreamDescriptionSummary.html)."""
    if kinesis is None:
        kinesis = aws_clients.client(
            "kinesis",
            aws_clients.JOB_S3,
            region=config.region,
            endpoint_url=config.kinesis_endpoint_url,
        )
    try:
        summary = kinesis.describe_stream_summary(StreamName=config.stream_name)
    except Exception as exc:
        raise ConfigError(f"stream {config.stream_name}: cannot describe it: {exc}") from exc
    retention = int(summary["StreamDescriptionSummary"]["RetentionPeriodHours"])
    if retention > config.dedup_horizon_hours:
        raise ConfigError(
            f"stream {config.stream_name}: retention is {retention} h but dedup_horizon_hours "
            f"is {config.dedup_horizon_hours}; expected a horizon >= the retention (raise "
            "job.dedup_horizon_hours, or lower the stream's retention): a shorter horizon "
            "would silently drop readable records of a shard that is behind"
        )


def supervise(
    query: StreamingQuery,
    config: JobConfig,
    *,
    stop: StopRequest,
    keeper: LeaseKeeper | None = None,
    marker: StopMarker | None = None,
    outcome: Outcome | None = None,
) -> int:
    """The job's main loop; ``outcome`` (when given) gets why it ended."""
    said = outcome if outcome is not None else Outcome()
    poll = config.stop_poll_interval_sec
    while True:
        try:
            if query.awaitTermination(poll):
                break
        except Exception as exc:
            log.error("query failed, stopping the job: %s", _cause(exc))
            said.set(contract.EXIT_BATCH_FAILED, _cause(exc))
            return EXIT_QUERY_FAILED
        if keeper is not None and keeper.lost.is_set():
            log.error("lease lost, stopping at once: %s", keeper.reason)
            said.set(contract.EXIT_LEASE_LOST, keeper.reason)
            query.stop()
            return EXIT_LEASE_LOST
        if marker is not None and not stop.event.is_set() and marker.present():
            stop.request(f"stop marker {marker.path}", by=marker.requester())
        if stop.event.is_set():
            log.info(
                "stop requested (%s): stopping between batches (asked by: %s)", stop.reason, stop.by
            )
            _stop_between_batches(
                query, config.graceful_stop_timeout_sec, config.trigger_interval_sec
            )
            if marker is not None and stop.reason.startswith("stop marker"):
                marker.consume()
            if _failed(query, "query failed while stopping", said):
                return EXIT_QUERY_FAILED
            log.info("stopped gracefully")
            said.set(contract.EXIT_STOPPED_ON_REQUEST, stop.reason, stop.by)
            return EXIT_OK
    if not _failed(query, "query failed, stopping the job", said):
        log.error("query terminated without a stop request or an error")
        said.set(contract.EXIT_BATCH_FAILED, "query terminated without a stop request or an error")
    return EXIT_QUERY_FAILED


def _failed(query: StreamingQuery, what: str, outcome: Outcome) -> bool:
    """Whether the ended query ended on an error; if so its cause is logged after
    ``what`` and given to ``outcome`` (the one place both ways of ending read
    ``query.exception()``)."""
    failure = query.exception()
    if failure is not None:
        log.error("%s: %s", what, _cause(failure))
        outcome.set(contract.EXIT_BATCH_FAILED, _cause(failure))
    return failure is not None


def quiet_moment(now_ms: int, interval_ms: int) -> bool:
    """True when no trigger is about to fire or has just fired.

    A processing-time trigger fires on multiples of its interval (Spark's
    ``ProcessingTimeExecutor.nextBatchTime``), also after a late batch. Stopping
    well clear of a tick avoids interrupting a batch that has just written its
    offsets (which would leave an uncommitted batch for the next start)."""
    guard = min(max(interval_ms // 10, 50), 1_000)
    phase = now_ms % interval_ms
    return guard <= phase <= interval_ms - 3 * guard


def _stop_between_batches(query: StreamingQuery, timeout_sec: int, interval_sec: int) -> None:
    """Wait (bounded) until no batch runs and no trigger is due, then stop. A
    batch still running at the deadline is interrupted; it was not committed and
    is replayed, idempotently, by the next start."""
    interval_ms = interval_sec * 1_000

    def stoppable() -> bool:
        return not query.isActive or (
            quiet_moment(int(time.time() * 1_000), interval_ms)
            and not query.status.get("isTriggerActive")
            and quiet_moment(int(time.time() * 1_000), interval_ms)
        )

    wait_for(stoppable, timeout=timeout_sec, interval=0.02)
    query.stop()


def _cause(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 4000 else text[:4000] + " ..."
