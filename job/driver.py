"""``main()``: config -> lease -> session -> query -> exit code.

One entry point for EMR (``spark-submit job/main.py --config s3://...``) and
the local run (``python -m job --config cfg.json --work-dir .work/x``).

How it ends (the exit codes, the exit record, the status on EMR Serverless)
is :mod:`job.outcome`; the query and the loop that supervises it are
:mod:`job.query`.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from job.outcome import ExitCode, Outcome, Platform, process_status
from job.query import run
from job.session import build_session
from model import aws_clients, contract
from model.checkpoint_state import (
    CheckpointState,
    OldCheckpointError,
    check_resumable,
    inspect_checkpoint,
)
from model.config import ConfigError, JobConfig
from model.exit_record import write_exit_record
from model.graceful_stop import StopRequest
from model.job_version import version_of
from model.lease import LeaseHeldError, LeaseKeeper, make_lease
from model.spark_conf import local_conf
from model.storage_uri import is_s3, parse_s3_uri

log = logging.getLogger("job.driver")


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
        choices=[platform.value for platform in Platform],
        default=Platform.EMR.value,
        help="where the job runs: emr (a step on a cluster; default) or serverless (an EMR "
        "Serverless job run: a refused configuration or checkpoint ends the run with status 0 "
        "so that the service does not retry it; the exit record keeps code 2)",
    )
    return parser.parse_args(argv)


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
    """The job's own S3 client (config, lease, markers, exit record, checkpoint)."""
    return aws_clients.client(
        "s3", aws_clients.JOB_S3, region=config.region, endpoint_url=config.s3_endpoint_url
    )


def checked_checkpoint(config: JobConfig, s3_client: Any) -> CheckpointState:
    """The checkpoint's state, read under the lease before Spark starts; raises
    :class:`model.checkpoint_state.OldCheckpointError` (a ConfigError: exit 2)
    when it holds the old de-duplication operator's state."""
    location = config.checkpoint_location
    state = inspect_checkpoint(location, s3_client)
    check_resumable(state, config.instance_id)
    if state.committed:
        log.info("checkpoint %s: resuming after batch %d", location, state.committed_batches[-1])
    else:
        log.info("checkpoint %s: no batch committed yet; the next batch is batch 0", location)
    return state


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
        return process_status(ExitCode.BAD_CONFIG, args.platform)

    stop = StopRequest()
    stop.install()
    s3 = s3_client_for(config)
    return process_status(_main(config, args, stop, s3, Outcome()), args.platform)


def _main(
    config: JobConfig, args: argparse.Namespace, stop: StopRequest, s3: Any, outcome: Outcome
) -> ExitCode:
    """Lease, checkpoint check, session and query: the exit code. Why it ends
    (``outcome``) is written as the exit record while the lease is still held,
    so whoever sees the lease free also finds the record of that exit."""
    # The lease names the version this process runs: after a rolled-back
    # deploy the supervisor compares it with the stack's step (model.job_version).
    lease = make_lease(
        config.checkpoint_location,
        config.instance_id,
        config.lease_ttl_sec,
        s3,
        version=version_of(args.config),
    )
    try:
        lease.acquire(config.lease_wait_sec)
    except LeaseHeldError as exc:
        log.error("%s", exc)
        outcome.set(contract.EXIT_LEASE_REFUSED, str(exc))
        write_exit_record(config.checkpoint_location, outcome.record(ExitCode.LEASE_HELD), s3)
        return ExitCode.LEASE_HELD
    keeper = LeaseKeeper(lease)
    keeper.start()
    log.info(
        "instance %s: lease acquired by %s, version %s",
        config.instance_id,
        lease.owner,
        version_of(args.config),
    )
    code = ExitCode.QUERY_FAILED
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
) -> ExitCode:
    try:
        # Before Spark starts: a checkpoint the query cannot resume stops here.
        checkpoint = checked_checkpoint(config, s3)
        # On EMR Serverless every Spark setting comes from spark-submit (the
        # application's spark-defaults and the run's parameters; locally
        # local/serverless_launch.py passes the local ones the same way).
        serverless = args.platform == Platform.SERVERLESS
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
        return ExitCode.BAD_CONFIG
    except ConfigError as exc:
        log.error("invalid job configuration: %s", exc)
        outcome.set(contract.EXIT_CONFIG_REFUSED, str(exc))
        return ExitCode.BAD_CONFIG
    except Exception as exc:
        log.exception("job failed")
        outcome.set(contract.EXIT_BATCH_FAILED, f"{type(exc).__name__}: {exc}")
        return ExitCode.QUERY_FAILED


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


def _session(config: JobConfig, work_dir: str | None) -> SparkSession:
    conf = local_conf(work_dir) if work_dir else {}
    return build_session(conf, contract.app_name(config.instance_id))
