"""The streaming query: the checks before it starts (the checkpoint, the
stream's retention, the events table), the de-duplication seed, the query
itself, and the loop that supervises it until it fails, loses the lease or is
asked to stop (:func:`supervise`). :mod:`job.driver` runs it under the lease.

The driver (:mod:`job.driver`) reads the checkpoint under the lease before
Spark starts and hands what it found to :func:`run`.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from job.batch_gate import BatchGate, refusal
from job.cloudwatch import CloudWatchPublisher
from job.dedup_seed import Seed, read_seed
from job.key_series import UndeclaredKeySeries
from job.micro_batch import BatchProcessor, prepare
from job.monitoring import BatchResults, make_listener
from job.outcome import ExitCode, Outcome
from job.retry import with_retries
from job.sources import read_stream
from job.table.catalog import ensure_table, load_table, open_catalog
from job.table.evolution import evolve_loaded
from model import aws_clients, contract
from model.checkpoint_state import CheckpointState
from model.config import ConfigError, JobConfig
from model.graceful_stop import StopMarker, StopRequest
from model.kafka_settings import KafkaSettings, resolve_bootstrap_servers
from model.lease import LeaseKeeper
from model.polling import wait_for

log = logging.getLogger(__name__)


def seed_for(
    spark: SparkSession, table: Table, config: JobConfig, checkpoint: CheckpointState
) -> Seed | None:
    """The table's recent ids for a checkpoint whose batch 0 is still to run
    (:mod:`job.dedup_seed`); None once a batch is committed (Spark would ignore it)."""
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
    catalog = with_retries(lambda: open_catalog(config), "open catalog", config.catalog)
    try:
        loaded = load_table(config, catalog)
    except NoSuchTableError:
        return ensure_table(config, catalog)
    evolve_loaded(loaded, config)
    return ensure_table(config, catalog, loaded=loaded)


def run(
    spark: SparkSession,
    config: JobConfig,
    *,
    stop: StopRequest,
    checkpoint: CheckpointState,
    keeper: LeaseKeeper | None = None,
    s3_client: Any = None,
    outcome: Outcome | None = None,
) -> ExitCode:
    """Start the query and supervise it until it fails or is asked to stop.

    ``checkpoint``: what the driver found there before Spark started
    (:func:`job.driver.checked_checkpoint`); ``s3_client``: the job's, for
    the stop marker and the undeclared-key series on S3 (None locally)."""
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
    gate = BatchGate(_asked_to_stop(stop, marker))
    query = (
        prepare(read_stream(spark, config), config, seed=None if seed is None else seed.frame)
        .writeStream.queryName(f"events_{config.instance_id}".replace("-", "_"))
        .option("checkpointLocation", config.checkpoint_location)
        .trigger(processingTime=f"{config.trigger_interval_sec} seconds")
        .foreachBatch(gate.wrap(processor))
        .start()
    )
    log.info("query %s started (checkpoint %s)", query.id, config.checkpoint_location)
    try:
        return supervise(
            query, config, stop=stop, keeper=keeper, marker=marker, outcome=outcome, gate=gate
        )
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


def _asked_to_stop(stop: StopRequest, marker: StopMarker | None) -> Any:
    """What the gate asks as every batch starts: has a stop been asked for (a
    signal, or the marker: one more HEAD per batch on S3)? So under load a
    stop is seen by the first batch after the marker appeared, not at the
    main loop's next poll (``stop_poll_interval_sec``)."""

    def asked() -> bool:
        if stop.event.is_set():
            return True
        if marker is not None and marker.present():
            stop.request(f"stop marker {marker.path}", by=marker.requester())
            return True
        return False

    return asked


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
    gate: BatchGate | None = None,
) -> ExitCode:
    """The job's main loop; ``outcome`` (when given) gets why it ended.
    ``gate``: the one in front of the query's batches (:mod:`job.batch_gate`)."""
    said = outcome if outcome is not None else Outcome()
    gate = gate if gate is not None else BatchGate()
    poll = config.stop_poll_interval_sec
    while True:
        try:
            if query.awaitTermination(poll):
                break
        except Exception as exc:
            # The gate saw the stop first, as a batch started, and the query
            # ended on its refusal: finish the stop below.
            if not (refusal(exc, gate) and stop.event.is_set()):
                log.error("query failed, stopping the job: %s", _cause(exc))
                said.set(contract.EXIT_BATCH_FAILED, _cause(exc))
                return ExitCode.QUERY_FAILED
        if keeper is not None and keeper.lost.is_set():
            log.error("lease lost, stopping at once: %s", keeper.reason)
            said.set(contract.EXIT_LEASE_LOST, keeper.reason)
            query.stop()
            return ExitCode.LEASE_LOST
        if marker is not None and not stop.event.is_set() and marker.present():
            stop.request(f"stop marker {marker.path}", by=marker.requester())
        if stop.event.is_set():
            log.info(
                "stop requested (%s): stopping after the batch in flight (asked by: %s)",
                stop.reason,
                stop.by,
            )
            _stop_after_batch(
                query, gate, config.graceful_stop_timeout_sec, config.trigger_interval_sec
            )
            if marker is not None and stop.reason.startswith("stop marker"):
                marker.consume()
            if _failed(query, "query failed while stopping", said, gate):
                return ExitCode.QUERY_FAILED
            if gate.refused is not None:
                log.info(
                    "stopped gracefully; batch %d was refused before it started (the "
                    "error Spark logged for it above is that refusal) and runs at the next start",
                    gate.refused,
                )
            else:
                log.info("stopped gracefully")
            said.set(contract.EXIT_STOPPED_ON_REQUEST, stop.reason, stop.by)
            return ExitCode.OK
    if not _failed(query, "query failed, stopping the job", said):
        log.error("query terminated without a stop request or an error")
        said.set(contract.EXIT_BATCH_FAILED, "query terminated without a stop request or an error")
    return ExitCode.QUERY_FAILED


def _failed(
    query: StreamingQuery, what: str, outcome: Outcome, gate: BatchGate | None = None
) -> bool:
    """Whether the ended query ended on an error; if so its cause is logged after
    ``what`` and given to ``outcome`` (the one place both ways of ending read
    ``query.exception()``). The gate's refusal of a batch after a stop
    request is no error: it is how the stop ends."""
    failure = query.exception()
    if gate is not None and refusal(failure, gate):
        return False
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


def _stop_after_batch(
    query: StreamingQuery, gate: BatchGate, timeout_sec: int, interval_sec: int
) -> None:
    """End the query right after the batch in flight, under any load: the
    gate closes, so the next batch Spark starts is refused before it does
    anything and the query ends on that refusal (:mod:`job.batch_gate`). A
    stream with no batch to start (no new data) is stopped instead once it
    has been quiet for a whole trigger interval, well clear of a tick and
    with no trigger active. Bounded by ``timeout_sec``: a batch still
    running then is interrupted; it was not committed and is replayed,
    idempotently, by the next start."""
    gate.close()
    interval_ms = interval_sec * 1_000

    def ended_or_idle() -> bool:
        if not query.isActive:
            return True
        return (
            gate.idle_for() > interval_sec
            and quiet_moment(int(time.time() * 1_000), interval_ms)
            and not query.status.get("isTriggerActive")
            and quiet_moment(int(time.time() * 1_000), interval_ms)
        )

    wait_for(ended_or_idle, timeout=timeout_sec, interval=0.02)
    if query.isActive:
        query.stop()


def _cause(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 4000 else text[:4000] + " ..."
