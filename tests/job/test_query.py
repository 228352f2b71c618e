"""``job.query``: the checks before the query starts, the loop that
supervises it (:func:`~job.query.supervise`, driven with a fake query: no
JVM), and the real ``run()`` loop end to end in-process.

The loop's decisions are Python logic: which exit code, whether it waits for
the running batch before stopping, whether the stop marker is consumed. A
scripted query stands in for Spark's ``StreamingQuery``; the same paths with a
real query run below (python-kinesis source on moto, tansu, moto CloudWatch;
each case bounded in time, its query stopped in ``finally``: ``run`` returns
only once the query stopped), in ``test_driver.py`` (SIGTERM to
``python -m job``) and the e2e suite (the stop marker ends a real job,
``tests/e2e/test_lifecycle.py``).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from pyspark.sql.streaming.query import StreamingQuery

from job.driver import checked_checkpoint
from job.outcome import ExitCode
from job.query import check_stream_retention, quiet_moment, run, supervise
from local.emulators import Endpoints, free_port
from local.table import read_rows
from model import contract
from model.config import ConfigError, JobConfig
from model.graceful_stop import StopMarker, StopRequest
from model.lease import LeaseLostError
from tests.job.job_helpers import event, job_config
from tests.job.lease_fakes import ScriptedLease, keeper_that_lost
from tests.waits import poll

pytestmark = pytest.mark.timeout(600)


class FakeQuery:
    """What ``supervise`` uses of a ``StreamingQuery``.

    ``awaitTermination`` returns at once (as if its timeout had passed) and runs
    the action scripted for that poll; a batch is running (``isTriggerActive``)
    for the first ``busy_reads`` reads of ``status``."""

    def __init__(
        self,
        *,
        on_poll: dict[int, Callable[[], None]] | None = None,
        busy_reads: int = 0,
        terminates: bool = False,
        await_raises: Exception | None = None,
        exception: Exception | None = None,
        exception_after_stop: Exception | None = None,
    ) -> None:
        self.on_poll = on_poll or {}
        self.busy_reads = busy_reads
        self.terminates = terminates
        self.await_raises = await_raises
        self._exception = exception
        self._exception_after_stop = exception_after_stop
        self.poll_timeouts: list[float | None] = []
        self.status_reads = 0
        self.stop_calls = 0
        self.batch_running_at_stop: bool | None = None
        self._guard = threading.Lock()

    def awaitTermination(self, timeout: float | None = None) -> bool:  # noqa: N802 (Spark's name)
        self.poll_timeouts.append(timeout)
        action = self.on_poll.get(len(self.poll_timeouts))
        if action is not None:
            action()
        if self.await_raises is not None:
            raise self.await_raises
        return self.terminates

    def _batch_running(self) -> bool:
        return self.status_reads <= self.busy_reads

    @property
    def status(self) -> dict[str, Any]:
        with self._guard:
            self.status_reads += 1
            return {"isTriggerActive": self._batch_running(), "isDataAvailable": True}

    @property
    def isActive(self) -> bool:  # noqa: N802 (Spark's name)
        return self.stop_calls == 0 and not self.terminates

    def stop(self) -> None:
        self.stop_calls += 1
        if self.batch_running_at_stop is None:
            self.batch_running_at_stop = self.status_reads > 0 and self._batch_running()

    def exception(self) -> Exception | None:
        if self.stop_calls and self._exception_after_stop is not None:
            return self._exception_after_stop
        return self._exception


def test_the_fake_has_only_what_a_streaming_query_has() -> None:
    used = ("awaitTermination", "status", "isActive", "stop", "exception")
    assert all(hasattr(StreamingQuery, name) for name in used)
    assert {n for n in vars(FakeQuery) if not n.startswith("_")} == set(used)


def _config(**overrides: Any) -> JobConfig:
    settings: dict[str, Any] = {"trigger_interval_sec": 1, "stop_poll_interval_sec": 1}
    settings.update(overrides)
    return job_config(database="d", bootstrap="b:1", **settings)


@pytest.fixture
def job_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="job.query")
    return caplog


def test_a_stop_request_waits_for_the_running_batch_then_exits_0(
    job_log: pytest.LogCaptureFixture,
) -> None:
    stop = StopRequest()
    query = FakeQuery(on_poll={3: lambda: stop.request("signal SIGTERM")}, busy_reads=4)
    config = _config()

    assert supervise(query, config, stop=stop) == ExitCode.OK

    assert query.poll_timeouts == [config.stop_poll_interval_sec] * 3
    assert query.stop_calls == 1
    assert query.status_reads > 4, "the batch running when the request came was waited for"
    assert query.batch_running_at_stop is False
    assert "stop requested (signal SIGTERM): stopping after the batch in flight" in job_log.text
    assert "stopped gracefully" in job_log.text


def test_stop_marker_stops_between_batches_and_is_consumed(
    tmp_path: Path, job_log: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "control" / "stop"
    path.parent.mkdir()
    stop = StopRequest()
    query = FakeQuery(on_poll={2: lambda: path.write_text('{"by": "test"}')}, busy_reads=2)
    marker = StopMarker(str(path))

    assert supervise(query, _config(), stop=stop, marker=marker) == ExitCode.OK

    assert len(query.poll_timeouts) == 2, "seen on the first poll after it appeared"
    assert stop.reason == f"stop marker {path}"
    assert query.stop_calls == 1 and query.batch_running_at_stop is False
    assert not path.exists(), "consumed, so the next version can start"
    assert f"stop requested (stop marker {path})" in job_log.text


def test_a_signal_does_not_consume_a_marker_it_did_not_read(tmp_path: Path) -> None:
    path = tmp_path / "stop"
    stop = StopRequest()
    stop.request("signal SIGINT")
    query = FakeQuery(on_poll={1: lambda: path.write_text("")})

    assert supervise(query, _config(), stop=stop, marker=StopMarker(str(path))) == ExitCode.OK
    assert stop.reason == "signal SIGINT"
    assert path.exists()


def test_a_lost_lease_stops_at_once_mid_batch_with_exit_4(
    job_log: pytest.LogCaptureFixture,
) -> None:
    # Found taken on the second renewal.
    lease = ScriptedLease(
        [None, LeaseLostError("lease s3://b/cp/_lease was taken by another copy")]
    )
    keeper = keeper_that_lost(lease)
    stop = StopRequest()
    query = FakeQuery(busy_reads=1_000)

    assert supervise(query, _config(), stop=stop, keeper=keeper) == ExitCode.LEASE_LOST

    assert lease.renewals == 2
    assert query.stop_calls == 1
    assert query.status_reads == 0, "no wait for the running batch: another copy writes"
    assert (
        "lease lost, stopping at once: lease s3://b/cp/_lease was taken by another copy"
        in job_log.text
    )


def test_a_failed_batch_exits_1_with_the_cause_bounded(job_log: pytest.LogCaptureFixture) -> None:
    cause = "KafkaDeliveryError: 1 of 1 failure records not delivered " + "x" * 5_000
    query = FakeQuery(on_poll={}, await_raises=RuntimeError(cause))

    assert supervise(query, _config(), stop=StopRequest()) == ExitCode.QUERY_FAILED

    [record] = [r for r in job_log.records if r.levelno == logging.ERROR]
    message = record.getMessage()
    assert message.startswith("query failed, stopping the job: KafkaDeliveryError: 1 of 1")
    assert message.endswith(" ...") and len(message) < 4_100


@pytest.mark.parametrize(
    ("exception", "logged"),
    [
        (None, "query terminated without a stop request or an error"),
        (RuntimeError("stream vanished"), "query failed, stopping the job: stream vanished"),
    ],
)
def test_a_query_that_ends_by_itself_exits_1(
    exception: Exception | None, logged: str, job_log: pytest.LogCaptureFixture
) -> None:
    query = FakeQuery(terminates=True, exception=exception)

    assert supervise(query, _config(), stop=StopRequest()) == ExitCode.QUERY_FAILED

    assert len(query.poll_timeouts) == 1
    assert logged in job_log.text


def test_a_batch_failing_while_stopping_exits_1(job_log: pytest.LogCaptureFixture) -> None:
    stop = StopRequest()
    stop.request("signal SIGTERM")
    query = FakeQuery(exception_after_stop=RuntimeError("batch 7 failed"))

    assert supervise(query, _config(), stop=stop) == ExitCode.QUERY_FAILED

    assert query.stop_calls == 1
    assert "query failed while stopping: batch 7 failed" in job_log.text
    assert "stopped gracefully" not in job_log.text


def test_the_wait_for_a_running_batch_is_bounded_by_the_graceful_timeout() -> None:
    stop = StopRequest()
    stop.request("signal SIGTERM")
    query = FakeQuery(busy_reads=10**9)  # the batch never ends

    assert supervise(query, _config(graceful_stop_timeout_sec=1), stop=stop) == ExitCode.OK

    assert query.stop_calls == 1
    assert query.batch_running_at_stop is True, "interrupted: it is replayed on the next start"


def test_stop_waits_for_a_moment_clear_of_trigger_ticks() -> None:
    assert not quiet_moment(10_000, 1_000), "a trigger fires right now"
    assert not quiet_moment(10_020, 1_000), "one may just have started"
    assert quiet_moment(10_400, 1_000)
    assert not quiet_moment(10_800, 1_000), "the next is due"
    assert quiet_moment(25_000, 10_000) and not quiet_moment(29_500, 10_000)


@mock_aws
def test_a_stream_kept_longer_than_the_dedup_horizon_stops_the_start() -> None:
    kinesis = boto3.client("kinesis", region_name="us-east-1")
    kinesis.create_stream(StreamName="stream-a", ShardCount=1)
    config = job_config(database="db", bootstrap="127.0.0.1:1")
    check_stream_retention(config, kinesis)  # 24 h retention, 24 h horizon: fine
    kinesis.increase_stream_retention_period(StreamName="stream-a", RetentionPeriodHours=48)
    with pytest.raises(ConfigError) as error:
        check_stream_retention(config, kinesis)
    assert "stream stream-a: retention is 48 h but dedup_horizon_hours is 24" in str(error.value)


def _stream(endpoints: Endpoints, shards: int = 2) -> tuple[Any, str]:
    client = boto3.client("kinesis", endpoint_url=endpoints.aws_url, region_name="us-east-1")
    name = f"job-{uuid.uuid4().hex[:8]}"
    client.create_stream(StreamName=name, ShardCount=shards)
    client.get_waiter("stream_exists").wait(
        StreamName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 20}
    )
    return client, name


def _put(client: Any, stream: str, records: list[bytes]) -> None:
    for begin in range(0, len(records), 500):
        chunk = records[begin : begin + 500]
        reply = client.put_records(
            StreamName=stream,
            Records=[{"Data": d, "PartitionKey": str(begin + i)} for i, d in enumerate(chunk)],
        )
        assert not reply.get("FailedRecordCount"), reply


def _stream_config(
    endpoints: Endpoints, stream: str, tmp_path: Path, **overrides: Any
) -> JobConfig:
    settings: dict[str, Any] = {
        "stream_name": stream,
        "kinesis_endpoint_url": endpoints.aws_url,
        "trigger_interval_sec": 1,
        "source": {"max_fetch_records_per_shard": 150, "describe_shard_interval_sec": 5},
        "metrics": {"endpoint_url": endpoints.aws_url, "timeout_sec": 2, "max_attempts": 2},
    }
    settings.update(overrides)
    return job_config(
        database=f"job_{uuid.uuid4().hex[:8]}",
        bootstrap=endpoints.kafka_bootstrap,
        checkpoint=str(tmp_path / "checkpoint"),
        **settings,
    )


class Running:
    """``run()`` on a thread; ``stop()`` asks for a graceful stop and joins."""

    def __init__(self, spark: Any, config: JobConfig) -> None:
        self.stop_request = StopRequest()
        self.code: int | None = None
        self.thread = threading.Thread(target=self._main, args=(spark, config), daemon=True)
        self.thread.start()

    def _main(self, spark: Any, config: JobConfig) -> None:
        checkpoint = checked_checkpoint(config, None)
        self.code = run(spark, config, stop=self.stop_request, checkpoint=checkpoint)

    def alive(self) -> bool:
        if not self.thread.is_alive():
            raise AssertionError(f"run() returned early with {self.code}")
        return True

    def wait(self, timeout: float) -> int | None:
        self.thread.join(timeout)
        return self.code

    def stop(self, timeout: float = 120) -> int | None:
        self.stop_request.request("test")
        return self.wait(timeout)


def _ids(spark: Any, config: JobConfig) -> list[str]:
    """The table's ids through its catalog (what any reader sees)."""
    return [str(r["id"]) for r in read_rows(config, ("id",))]


def _commits(config: JobConfig) -> list[int]:
    commits = Path(config.checkpoint_location) / "commits"
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())


def test_replay_after_losing_the_last_commit_leaves_no_duplicate_and_no_gap(
    spark: Any, endpoints: Endpoints, tmp_path: Path
) -> None:
    client, stream = _stream(endpoints)
    expected = {f"r-{i:04d}" for i in range(600)}
    records = [event(i) for i in sorted(expected)]
    records += [event("r-0001"), event("r-0599")]  # re-sent by the producer
    records += [b"not json", event("bad", payload=1)]
    # CloudWatch is down for the first run: the job must not care.
    dead_metrics = {"endpoint_url": f"http://127.0.0.1:{free_port()}", "timeout_sec": 1}
    config = _stream_config(endpoints, stream, tmp_path, metrics=dead_metrics)
    _put(client, stream, records)

    job = Running(spark, config)
    try:
        poll(
            lambda: job.alive() and len(set(_ids(spark, config))) == len(expected),
            "all rows",
            300,
        )
    finally:
        assert job.stop() == ExitCode.OK
    commits = _commits(config)
    assert len(commits) >= 2, "150 records per shard per batch: several batches"
    ids = _ids(spark, config)
    assert len(ids) == len(set(ids)) and set(ids) == expected

    # The driver "died" after writing the last batch but before committing it.
    last = commits[-1]
    # (A crash before the commit leaves neither the file nor Hadoop's checksum.)
    commits_dir = Path(config.checkpoint_location) / "commits"
    (commits_dir / str(last)).unlink()
    (commits_dir / f".{last}.crc").unlink(missing_ok=True)
    restarted = JobConfig.from_dict(
        {**config.to_dict(), "metrics": {"endpoint_url": endpoints.aws_url}}
    )
    job = Running(spark, restarted)
    try:
        poll(
            lambda: job.alive() and last in _commits(config),
            f"batch {last} replayed and committed",
            180,
        )
    finally:
        assert job.stop() == ExitCode.OK
    ids = _ids(spark, config)
    assert len(ids) == len(set(ids)), "0 duplicates"
    assert set(ids) == expected, "0 missing"

    cloudwatch = boto3.client("cloudwatch", endpoint_url=endpoints.aws_url, region_name="us-east-1")
    names = {
        m["MetricName"]
        for m in cloudwatch.list_metrics(
            Namespace=contract.metric_namespace(config.instance_id),
            Dimensions=[{"Name": contract.INSTANCE_DIMENSION, "Value": config.instance_id}],
        )["Metrics"]
    }
    assert {contract.HEARTBEAT, contract.BATCH_DURATION_MS} <= names


def test_a_batch_whose_failures_cannot_be_delivered_stops_the_query_uncommitted(
    spark: Any, endpoints: Endpoints, tmp_path: Path
) -> None:
    client, stream = _stream(endpoints, shards=1)
    dead = {
        "topic": "failures",
        "bootstrap_servers": f"127.0.0.1:{free_port()}",
        "delivery_timeout_ms": 3_000,
        "request_timeout_ms": 2_000,
        "flush_timeout_sec": 5,
    }
    config = _stream_config(endpoints, stream, tmp_path, kafka=dead)
    _put(client, stream, [event("ok"), b"poison"])
    job = Running(spark, config)
    try:
        code = job.wait(timeout=240)
    finally:
        if job.thread.is_alive():
            job.stop()
    assert code == ExitCode.QUERY_FAILED
    offsets = Path(config.checkpoint_location) / "offsets"
    planned = {int(p.name) for p in offsets.iterdir() if p.name.isdigit()}
    assert planned, "the batch was planned"
    assert not (Path(config.checkpoint_location) / "commits").exists() or not _commits(config)
    assert _ids(spark, config) == [], "nothing written: the replay will write it"
