"""The job's query end to end in-process: python-kinesis source on moto, tansu,
moto CloudWatch, the real ``run()`` loop. Each case is bounded in time and
stops its query in ``finally`` (``run`` returns only once the query stopped).

The stop marker and the other exits of the supervising loop are Python logic,
tested with a fake query in ``test_job_supervise.py`` (and end to end, on a
real job, in ``tests/e2e/test_lifecycle.py``)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest

from job.driver import EXIT_OK, EXIT_QUERY_FAILED, run
from local.emulators import Endpoints, free_port
from local.table import read_rows
from model import contract
from model.config import JobConfig
from model.graceful_stop import StopRequest
from tests.job.job_helpers import event, job_config

pytestmark = pytest.mark.timeout(600)


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


def _config(endpoints: Endpoints, stream: str, tmp_path: Path, **overrides: Any) -> JobConfig:
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
        self.code = run(spark, config, stop=self.stop_request)

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


def _poll(check: Callable[[], bool], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.5)


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
    config = _config(endpoints, stream, tmp_path, metrics=dead_metrics)
    _put(client, stream, records)

    job = Running(spark, config)
    try:
        _poll(
            lambda: job.alive() and len(set(_ids(spark, config))) == len(expected),
            "all rows",
            300,
        )
    finally:
        assert job.stop() == EXIT_OK
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
        _poll(
            lambda: job.alive() and last in _commits(config),
            f"batch {last} replayed and committed",
            180,
        )
    finally:
        assert job.stop() == EXIT_OK
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
    config = _config(endpoints, stream, tmp_path, kafka=dead)
    _put(client, stream, [event("ok"), b"poison"])
    job = Running(spark, config)
    try:
        code = job.wait(timeout=240)
    finally:
        if job.thread.is_alive():
            job.stop()
    assert code == EXIT_QUERY_FAILED
    offsets = Path(config.checkpoint_location) / "offsets"
    planned = {int(p.name) for p in offsets.iterdir() if p.name.isdigit()}
    assert planned, "the batch was planned"
    assert not (Path(config.checkpoint_location) / "commits").exists() or not _commits(config)
    assert _ids(spark, config) == [], "nothing written: the replay will write it"
