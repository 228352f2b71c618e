"""scripts.status: checkpoint parsing, lag, metrics, alarms, snapshot and the
command's errors, on files, in-process moto (``mock_aws``) and a SQLite catalog.

The helpers at the top build what a local run leaves behind (its job.json,
checkpoint files); tests/scripts/test_stop.py and test_produce.py use them too.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from app import contract
from app.config import JobConfig
from app.monitoring import Datum, metric_data, progress_datums
from local.harness import load_example_instances, replace_fields
from local.job_process import write_config
from local.table import sql_catalog
from scripts import status
from scripts.status_checkpoint import (
    AFTER,
    AT_TIMESTAMP,
    SHARD_END,
    TRIM_HORIZON,
    Batches,
    CheckpointError,
    CheckpointFiles,
    Position,
    last_batches,
    parse_offsets_file,
    read_checkpoint,
)
from scripts.status_kinesis import (
    Budget,
    Scan,
    Shard,
    add_response,
    estimate_records,
    lag_of,
    list_shards,
    position_for,
    shard_status,
)
from scripts.status_metrics import alarm_prefix, read_alarms, read_batches, rows_from_results
from scripts.status_optimizers import (
    Optimizers,
    not_available_locally,
    optimizer_states,
    read_optimizers,
)
from scripts.status_report import columns, format_report, lag_records, to_json
from scripts.status_table import snapshot_figures
from scripts.status_target import OperatorError, Target, resolve
from tests.fixtures import EXAMPLE_CDK_JSON

INSTANCE = "orders-ap-northeast-2"
REGION = "ap-northeast-2"
STREAM = contract.stream_name("orders", REGION)
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SHARD0, SHARD1 = "shardId-000000000000", "shardId-000000000001"
HASH_KEY = {SHARD0: "0", SHARD1: str(2**127 + 1)}


# ------------------------------------------------------------------ helpers (shared)


def write_local_run(work_dir: Path, instance_id: str = INSTANCE, **overrides: Any) -> JobConfig:
    """A local run's job.json as local.harness writes it, with AWS endpoints
    left to in-process moto (none) and the SQLite catalog under the run."""
    from infra.job_config import job_config_for

    instance = {i.instance_id: i for i in load_example_instances(EXAMPLE_CDK_JSON)}[instance_id]
    root = work_dir / instance_id
    config = job_config_for(
        instance,
        checkpoint_location=str(root / "checkpoint"),
        kafka_bootstrap_servers="127.0.0.1:9",
        kafka_security="PLAINTEXT",
        database_location=str(root / "warehouse" / f"{instance.database_name}.db"),
        stop_marker_path=str(root / "stop"),
        source_format="python-kinesis",
    )
    config = replace_fields(config, {"catalog": sql_catalog(root), **overrides})
    write_config(config, root / "job.json")
    return config


def write_batch(
    checkpoint: Path, batch: int, offset: dict[str, Any], *, committed: bool = True
) -> None:
    """Spark's offsets/N (version, batch metadata, the source's offset) and commits/N."""
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / "offsets" / str(batch)).write_text(
        'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{}}\n' + json.dumps(offset),
        encoding="utf-8",
    )
    if committed:
        (checkpoint / "commits" / str(batch)).write_text(
            'v1\n{"nextBatchWatermarkMs":0}', encoding="utf-8"
        )


def shards_offset(**after: str | None) -> dict[str, Any]:
    """A python-kinesis offset: shard index -> last sequence handed to Spark."""
    return {
        "shards": {
            f"shardId-{int(k.removeprefix('s')):012d}": {"after": v, "ts": None, "done": False}
            for k, v in after.items()
        }
    }


def make_stream(shards: int = 2) -> Any:
    kinesis = boto3.client("kinesis", region_name=REGION)
    kinesis.create_stream(StreamName=STREAM, ShardCount=shards)
    return kinesis


def put(kinesis: Any, shard: str, n: int) -> list[str]:
    """``n`` records on ``shard``; their sequence numbers."""
    return [
        kinesis.put_record(
            StreamName=STREAM, Data=b"{}", PartitionKey="k", ExplicitHashKey=HASH_KEY[shard]
        )["SequenceNumber"]
        for _ in range(n)
    ]


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


# ------------------------------------------------------------------ checkpoint files


def test_python_kinesis_offset_is_the_batch_start_per_shard() -> None:
    """The executor-side reader's offset names its batch and where it started
    (its ends are recorded beside the checkpoint): an upper bound on lag."""
    raw = {
        "v": 2,
        "batch": 5,
        "shards": {"a": {"after": "49", "ts": None, "done": False}},
        "reads": [{"shard": "a", "closed": False}],
    }
    offset = parse_offsets_file('v1\n{"batchWatermarkMs":0}\n' + json.dumps(raw), "cp/offsets/5")
    assert offset.format == "python-kinesis" and not offset.is_batch_end
    assert offset.positions == {"a": Position(AFTER, sequence="49")}


def test_the_driver_side_readers_offset_is_the_batch_end_per_shard() -> None:
    text = 'v1\n{"batchWatermarkMs":0}\n' + json.dumps(
        {
            "shards": {
                "a": {"after": "49", "ts": None, "done": False},
                "b": {"after": None, "ts": 1700000000.5, "done": False},
                "c": {"after": None, "ts": None, "done": False},
                "d": {"after": "7", "ts": None, "done": True},
            }
        }
    )
    offset = parse_offsets_file(text, "cp/offsets/3")
    assert offset.format == "python-kinesis" and offset.is_batch_end
    assert offset.positions == {
        "a": Position(AFTER, sequence="49"),
        "b": Position(AT_TIMESTAMP, timestamp=1700000000.5),
        "c": Position(TRIM_HORIZON),
        "d": Position(SHARD_END),
    }
    assert offset.positions["a"].iterator_args() == {
        "ShardIteratorType": AFTER,
        "StartingSequenceNumber": "49",
    }


def test_aws_kinesis_offset_is_the_batch_start() -> None:
    raw = {
        "metadata": {"streamName": "s", "batchId": "7"},
        "shardId-000000000001": {
            "iteratorType": "AFTER_SEQUENCE_NUMBER",
            "iteratorPosition": "4960",
            "subSequenceNumber": "-1",
            "isLast": "true",
        },
        "shardId-000000000002": {
            "iteratorType": "AT_TIMESTAMP",
            "iteratorPosition": "1700000000500",
        },
        "shardId-000000000003": {"iteratorType": "TRIM_HORIZON", "iteratorPosition": ""},
    }
    offset = parse_offsets_file("v1\n{}\n" + json.dumps(raw), "x")
    assert offset.format == "aws-kinesis" and not offset.is_batch_end
    assert offset.positions == {
        "shardId-000000000001": Position(AFTER, sequence="4960"),
        "shardId-000000000002": Position(AT_TIMESTAMP, timestamp=1700000000.5),
        "shardId-000000000003": Position(TRIM_HORIZON),
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v1\n{}\n", "got 2 line"),
        ('v1\n{}\n{"shards": {}}\n{"shards": {}}', "2 sources"),
        ('v1\n{}\n{"partitions": 1}', "expected a python-kinesis offset"),
        ('v1\n{}\n{"metadata": {}, "s": {"iteratorType": "SIDEWAYS"}}', "unknown iteratorType"),
    ],
)
def test_a_bad_offsets_file_names_the_file(text: str, expected: str) -> None:
    with pytest.raises(CheckpointError, match=expected) as info:
        parse_offsets_file(text, "cp/offsets/9")
    assert "cp/offsets/9" in str(info.value)


@pytest.mark.parametrize(
    ("offsets", "commits", "expected"),
    [
        ([0, 1, 2], [0, 1, 2], Batches(2, None)),
        ([0, 1, 2, 3], [0, 1, 2], Batches(2, 3)),
        ([0], [], Batches(None, 0)),
        ([], [], Batches(None, None)),
    ],
)
def test_last_batches(offsets: list[int], commits: list[int], expected: Batches) -> None:
    assert last_batches(offsets, commits) == expected


def test_read_checkpoint_takes_the_last_committed_batch(tmp_path: Path) -> None:
    cp = tmp_path / "checkpoint"
    write_batch(cp, 0, shards_offset(s0="1", s1=None))
    write_batch(cp, 1, shards_offset(s0="5", s1="3"))
    write_batch(cp, 2, shards_offset(s0="9", s1="8"), committed=False)
    (cp / "offsets" / ".1.crc").write_text("x")  # Spark's checksum files are not batches
    state = read_checkpoint(CheckpointFiles(str(cp)))
    assert state.batches == Batches(1, 2)
    assert state.offset is not None
    assert state.offset.positions == {
        SHARD0: Position(AFTER, sequence="5"),
        SHARD1: Position(AFTER, sequence="3"),
    }
    assert state.committed_at is not None


def test_a_python_kinesis_offset_reads_as_its_batch_end_once_the_ends_are_applied(
    tmp_path: Path,
) -> None:
    """The offset says where reader batch 7 started; its tasks recorded the
    ends beside the checkpoint: status shows the end, exact. Without them it
    shows the start, as an upper bound on the lag."""
    cp = tmp_path / "checkpoint"
    start = {"after": "5", "ts": None, "done": False}
    offset = {
        "v": 2,
        "batch": 7,
        "shards": {SHARD0: start, SHARD1: start},
        "reads": [{"shard": SHARD0, "closed": False}],
    }
    write_batch(cp, 3, offset)
    state = read_checkpoint(CheckpointFiles(str(cp)))
    assert state.offset is not None and not state.offset.is_batch_end
    assert state.offset.positions[SHARD0] == Position(AFTER, sequence="5")
    ends = cp / "_kinesis_ends" / "7"
    ends.mkdir(parents=True)
    end = {"end": {"after": "42", "ts": None, "done": False}, "caught_up": True, "records": 37}
    (ends / f"{SHARD0}.json").write_text(json.dumps(end))
    state = read_checkpoint(CheckpointFiles(str(cp)))
    assert state.offset is not None and state.offset.is_batch_end
    assert state.offset.positions == {
        SHARD0: Position(AFTER, sequence="42"),
        SHARD1: Position(AFTER, sequence="5"),  # not read in that batch
    }


def test_a_missing_checkpoint_names_its_path(tmp_path: Path) -> None:
    expected = re.escape(f"checkpoint {tmp_path / 'nope'}: missing")
    with pytest.raises(CheckpointError, match=expected):
        read_checkpoint(CheckpointFiles(str(tmp_path / "nope")))
    (tmp_path / "empty" / "offsets").mkdir(parents=True)
    with pytest.raises(CheckpointError, match="missing"):
        read_checkpoint(CheckpointFiles(str(tmp_path / "empty")))


def test_a_commit_without_its_offsets_is_reported(tmp_path: Path) -> None:
    cp = tmp_path / "cp"
    write_batch(cp, 0, shards_offset(s0="1"))
    (cp / "commits" / "1").write_text("v1\n{}")
    with pytest.raises(CheckpointError, match="commits/1 has no offsets/1"):
        read_checkpoint(CheckpointFiles(str(cp)))


def test_checkpoint_on_s3(aws: None) -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="data")
    offsets = 'v1\n{}\n{"shards": {"shardId-000000000000": {"after": "42"}}}'
    for key, body in (
        ("cp/x/offsets/0", offsets.replace("42", "10")),
        ("cp/x/offsets/1", offsets),
        ("cp/x/commits/0", "v1\n{}"),
        ("cp/x/commits/1", "v1\n{}"),
        ("cp/x/offsets/2", offsets),
    ):
        s3.put_object(Bucket="data", Key=key, Body=body.encode())
    state = read_checkpoint(CheckpointFiles("s3://data/cp/x/", s3))
    assert state.batches == Batches(1, 2)
    assert state.committed_at is not None  # commits/1's LastModified
    assert state.offset is not None
    assert state.offset.positions == {SHARD0: Position(AFTER, sequence="42")}
    with pytest.raises(CheckpointError, match="s3://data/cp/y: missing"):
        read_checkpoint(CheckpointFiles("s3://data/cp/y", s3))


# ------------------------------------------------------------------ lag (pure)


def record(seq: int, at: datetime) -> dict[str, Any]:
    return {"SequenceNumber": str(seq), "ApproximateArrivalTimestamp": at}


def test_responses_fold_into_a_scan() -> None:
    t0 = NOW - timedelta(seconds=10)
    first = add_response(Scan(), {"Records": [record(5, t0)], "MillisBehindLatest": 9000})
    both = add_response(
        first,
        {"Records": [record(6, t0 + timedelta(seconds=1))], "MillisBehindLatest": 0},
    )
    assert (first.records, first.reached_tip, first.last_behind_ms) == (1, False, 9000)
    assert both == Scan(
        records=2,
        reached_tip=True,
        last_sequence="6",
        first_arrival=t0,
        last_arrival=t0 + timedelta(seconds=1),
        last_behind_ms=0,
        calls=2,
    )
    lag = lag_of(both, NOW)
    # The tip arrived 1 s after the oldest unread record, which waited 10 s.
    assert (lag.records, lag.exact, lag.estimate, lag.behind_ms) == (2, True, None, 1000)
    assert lag.oldest_unread_age_ms == 10_000


def test_an_unfinished_scan_extrapolates_the_arrival_rate() -> None:
    t0 = NOW - timedelta(minutes=5)
    # 101 records over 10 s (10 per second), and 60 s of stream still unread.
    found = Scan(
        records=101,
        first_arrival=t0,
        last_arrival=t0 + timedelta(seconds=10),
        last_behind_ms=60_000,
        calls=1,
    )
    assert estimate_records(found) == 101 + 600
    lag = lag_of(found, NOW)
    assert not lag.exact and lag.records == 101 and lag.estimate == 701
    assert lag.behind_ms == 70_000  # 10 s read + 60 s still behind
    assert lag_records(lag) == ">=101 (~701 est.)"
    # All read records arrived at once: no rate, only the lower bound.
    same_time = Scan(records=5, first_arrival=t0, last_arrival=t0, last_behind_ms=1000)
    assert estimate_records(same_time) is None
    assert lag_records(lag_of(same_time, NOW)) == ">=5 (no rate to estimate)"


def test_a_shard_the_offset_does_not_list_starts_at_trim_horizon() -> None:
    committed = {SHARD0: Position(AFTER, sequence="3")}
    assert position_for(Shard(SHARD0), committed, "TRIM_HORIZON") == committed[SHARD0]
    assert position_for(Shard(SHARD1), committed, "LATEST") == Position(TRIM_HORIZON)
    assert position_for(Shard(SHARD1), None, "LATEST") == Position("LATEST")


def test_budget_must_allow_a_call() -> None:
    with pytest.raises(ValueError, match="max_calls=0"):
        Budget(max_calls=0)


# ------------------------------------------------------------------ Kinesis (moto)


def test_lag_is_the_records_after_the_committed_position(aws: None) -> None:
    kinesis = make_stream()
    seqs0 = put(kinesis, SHARD0, 7)
    seqs1 = put(kinesis, SHARD1, 3)
    shards = list_shards(kinesis, STREAM)
    assert [s.shard_id for s in shards] == [SHARD0, SHARD1] and not shards[0].closed
    budget = Budget()
    behind = shard_status(
        kinesis, STREAM, shards[0], Position(AFTER, sequence=seqs0[3]), budget,
        tip_window_sec=60, now=lambda: datetime.now(UTC),
    )  # fmt: skip
    caught_up = shard_status(
        kinesis, STREAM, shards[1], Position(AFTER, sequence=seqs1[-1]), budget,
        tip_window_sec=60, now=lambda: datetime.now(UTC),
    )  # fmt: skip
    assert behind.tip == seqs0[-1] and behind.lag.records == 3 and behind.lag.exact
    assert behind.lag.oldest_unread_age_ms >= 0
    assert caught_up.tip == seqs1[-1] and caught_up.lag.records == 0 and caught_up.lag.exact
    assert caught_up.lag.oldest_unread_age_ms == 0


def test_a_backlog_beyond_the_scan_is_a_lower_bound_and_the_tip_is_read_near_now(
    aws: None,
) -> None:
    kinesis = make_stream(shards=1)
    seqs = put(kinesis, SHARD0, 25)
    (shard,) = list_shards(kinesis, STREAM)
    found = shard_status(
        kinesis, STREAM, shard, Position(TRIM_HORIZON), Budget(max_calls=2, max_records=10),
        tip_window_sec=60, now=lambda: datetime.now(UTC),
    )  # fmt: skip
    assert not found.lag.exact and found.lag.records == 10
    assert found.tip == seqs[-1] and found.tip_note == "read near the tip"


def test_an_empty_shard_has_no_tip_and_no_lag(aws: None) -> None:
    kinesis = make_stream(shards=1)
    (shard,) = list_shards(kinesis, STREAM)
    found = shard_status(
        kinesis, STREAM, shard, Position(TRIM_HORIZON), Budget(),
        tip_window_sec=60, now=lambda: datetime.now(UTC),
    )  # fmt: skip
    assert found.tip is None and found.lag.records == 0 and found.lag.exact


# ------------------------------------------------------------------ metrics, alarms


def test_metric_results_merge_into_rows_of_batches() -> None:
    t = [NOW + timedelta(seconds=i) for i in range(4)]
    results = [
        {"Id": "batches", "Timestamps": [t[3], t[2], t[1], t[0]], "Values": [1.0, 0.0, 1.0, 1.0]},
        {"Id": "duration_ms", "Timestamps": [t[3], t[2], t[1]], "Values": [30.0, 99.0, 20.0]},
    ]
    rows = rows_from_results(results, last=2)
    assert [r.at for r in rows] == [t[1], t[3]]  # no batch in t[2]; t[0] is older
    assert rows[0].values == {"batches": 1.0, "duration_ms": 20.0}
    assert rows_from_results(results, last=0) == []


def test_batches_are_read_back_as_the_job_publishes_them(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    published = [NOW - timedelta(seconds=s) for s in (30, 20, 10)]
    for i, at in enumerate(published):
        progress = {"durationMs": {"triggerExecution": 1000 + i}, "numInputRows": 10 * (i + 1)}
        datums = progress_datums(progress, trigger_interval_sec=2, result=None, now=at)
        cloudwatch.put_metric_data(
            Namespace=contract.metric_namespace(INSTANCE), MetricData=metric_data(datums, INSTANCE)
        )
    idle = Datum(contract.HEARTBEAT, 1.0, "Count", NOW - timedelta(seconds=5))
    cloudwatch.put_metric_data(
        Namespace=contract.metric_namespace(INSTANCE), MetricData=metric_data([idle], INSTANCE)
    )
    rows = read_batches(cloudwatch, INSTANCE, now=NOW, minutes=5, period_sec=1, last=2)
    assert [r.values["duration_ms"] for r in rows] == [1001.0, 1002.0]
    assert [r.values["input_rows"] for r in rows] == [20.0, 30.0]
    assert all(r.values["batches"] == 1.0 for r in rows)
    every = read_batches(cloudwatch, INSTANCE, now=NOW, minutes=5, period_sec=1, last=10)
    assert len(every) == 3  # the idle heartbeat is not a batch


def test_alarms_are_the_stacks_own(aws: None) -> None:
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    stack = contract.stack_name("orders", REGION)
    for name in (f"{stack}-FallingBehind", f"{stack}-HeartbeatMissing", "other-FallingBehind"):
        cloudwatch.put_metric_alarm(
            AlarmName=name, MetricName=contract.HEARTBEAT,
            Namespace=contract.metric_namespace(INSTANCE),
            Statistic="Sum", Period=60, EvaluationPeriods=1, Threshold=1,
            ComparisonOperator="LessThanThreshold",
        )  # fmt: skip
    for name, state in (("HeartbeatMissing", "ALARM"), ("FallingBehind", "OK")):
        cloudwatch.set_alarm_state(AlarmName=f"{stack}-{name}", StateValue=state, StateReason="t")
    found = read_alarms(cloudwatch, stack)
    assert [(a.name, a.state) for a in found] == [
        (f"{stack}-HeartbeatMissing", "ALARM"),
        (f"{stack}-FallingBehind", "OK"),
    ]
    assert alarm_prefix(stack) == "Streaming-orders-ap-northeast-2-"


# ------------------------------------------------------------------ table


def test_the_last_snapshot_names_its_batch(tmp_path: Path) -> None:
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("t", **sql_catalog(tmp_path))
    catalog.create_namespace("db")
    table = catalog.create_table("db.events", schema=pa.schema([("id", pa.string())]))
    assert snapshot_figures("db.events", table.current_snapshot(), 0).snapshot_id is None
    for batch, n in ((4, 3), (5, 2)):
        rows = pa.table({"id": [f"{batch}-{i}" for i in range(n)]})
        table.append(
            rows,
            snapshot_properties={
                "spark.sql.streaming.queryId": "q",
                "spark.sql.streaming.epochId": str(batch),
            },
        )
    figures = snapshot_figures("db.events", table.current_snapshot(), len(table.snapshots()))
    assert (figures.batch_id, figures.query_id, figures.operation) == (5, "q", "append")
    assert (figures.added_records, figures.total_records, figures.snapshots) == (2, 5, 2)
    assert figures.snapshot_id == table.current_snapshot().snapshot_id  # type: ignore[union-attr]


# ------------------------------------------------------------------ the command


def test_status_of_a_local_run(tmp_path: Path, aws: None) -> None:
    config = write_local_run(tmp_path)
    kinesis = make_stream()
    seqs0 = put(kinesis, SHARD0, 5)
    seqs1 = put(kinesis, SHARD1, 4)
    write_batch(Path(config.checkpoint_location), 0, shards_offset(s0=seqs0[1], s1=seqs1[-1]))
    out = io.StringIO()
    code = status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path), "--json"], out)
    assert code == 0
    report = json.loads(out.getvalue())
    by_shard = {s["shard"]["shard_id"]: s for s in report["shards"]}
    assert by_shard[SHARD0]["tip"] == seqs0[-1] and by_shard[SHARD0]["lag"]["records"] == 3
    assert by_shard[SHARD1]["tip"] == seqs1[-1] and by_shard[SHARD1]["lag"]["records"] == 0
    assert report["total_lag"] == {**report["total_lag"], "records": 3, "exact": True}
    assert report["checkpoint"]["batches"] == {"committed": 0, "planned": None}
    assert report["job"]["running"] is False and report["table"] is None
    text = io.StringIO()
    assert status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path)], text) == 0
    printed = text.getvalue()
    assert f"after {seqs0[1]}" in printed and "batch 0 committed" in printed
    assert "not created yet" in printed and "none found" in printed
    assert "table optimizers (Glue, " in printed and "not available locally" in printed
    assert report["optimizers"] == {**report["optimizers"], "available": False, "states": []}


def test_unknown_instance_lists_the_known_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert status.main(["--instance", "nope-eu-west-1"]) == 2
    err = capsys.readouterr().err
    assert (
        f"'nope-eu-west-1': not declared in {EXAMPLE_CDK_JSON}; declared: orders-ap-northeast-2"
    ) in err
    write_local_run(tmp_path)
    assert status.main(["--instance", "payments-ap-northeast-2", "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"no local run under {tmp_path}" in err and f"instances run there: {INSTANCE}" in err
    assert len(err.strip().splitlines()) == 1


def test_unreachable_endpoint_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    write_local_run(tmp_path)
    code = status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path), "--endpoint-url", url])
    err = capsys.readouterr().err
    assert code == 2 and f"endpoint {url}/ unreachable" in err, err


def test_missing_checkpoint_and_missing_stream_are_named(
    tmp_path: Path, aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_local_run(tmp_path)
    assert status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path)]) == 2
    assert f"stream {STREAM}: not found" in capsys.readouterr().err
    make_stream()
    assert status.main(["--instance", INSTANCE, "--work-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"checkpoint {config.checkpoint_location}: missing" in err


def test_the_deployed_config_comes_from_the_stack_output(
    tmp_path: Path, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stack's JobStepSpec names the package; its job-config.json is the config.
    (The outputs are stubbed: moto's CloudFormation takes seconds to import and
    tests/deploy/test_redeploy.py already reads real ones.)"""
    from infra.emr_step import STEP_SPEC_OUTPUT, StepSpec
    from scripts import redeploy

    config = write_local_run(tmp_path)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="artifacts", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket="artifacts", Key="job/v1/job-config.json", Body=config.to_json().encode())
    spec = StepSpec("step", "app", "s3://artifacts/job/v1", "s3://data/stop", ("a-1.jar",))
    stack = contract.stack_name("orders", REGION)
    asked: list[str] = []

    def outputs(_client: Any, name: str) -> dict[str, str]:
        asked.append(name)
        return {STEP_SPEC_OUTPUT: json.dumps(spec.to_dict())} if asked[1:] else {}

    monkeypatch.setattr(redeploy, "stack_outputs", outputs)
    with pytest.raises(OperatorError, match=f"stack {stack}: no output {STEP_SPEC_OUTPUT}"):
        resolve(INSTANCE)
    target = resolve(INSTANCE)
    assert asked == [stack, stack]
    assert target.config == config and not target.local and target.stack_name == stack
    assert target.origin == "s3://artifacts/job/v1/job-config.json"
    missing = "s3://artifacts/job/v2/job-config.json"
    with pytest.raises(OperatorError, match=re.escape(f"{missing}: no such")):
        resolve(INSTANCE, config_file=missing)


def test_columns_align() -> None:
    assert columns(["a", "bb"], [["xxx", "1"], ["y", "22"]], indent="") == [
        "a    bb",
        "xxx   1",
        "y    22",
    ]


# ------------------------------------------------------------------ table optimizers


def _optimizer(kind: str, enabled: bool, run: dict[str, Any] | None = None) -> dict[str, Any]:
    optimizer: dict[str, Any] = {
        "type": kind,
        "configuration": {"roleArn": "r", "enabled": enabled},
    }
    if run is not None:
        optimizer["lastRun"] = run
    return {"catalogId": "123456789012", "databaseName": "db", "tableName": "events",
            "tableOptimizer": optimizer}  # fmt: skip


KST = timezone(timedelta(hours=9))
SUSPENDED = {
    "TableOptimizers": [
        _optimizer(
            "compaction",
            False,
            {
                "eventType": "failed",
                # botocore gives local time; the report is in UTC
                "startTimestamp": datetime(2026, 11, 21, 20, 0, tzinfo=KST),
                "endTimestamp": datetime(2026, 11, 21, 20, 4, tzinfo=KST),
                "error": "Access Denied (Service: S3, Status Code: 403)",
            },
        ),
        _optimizer(
            "retention",
            True,
            {
                "eventType": "completed",
                "startTimestamp": NOW - timedelta(hours=2),
                "endTimestamp": NOW - timedelta(hours=1),
            },
        ),
    ],
    "Failures": [
        {
            "type": "orphan_file_deletion",
            "error": {"ErrorCode": "EntityNotFoundException", "ErrorMessage": "no optimizer"},
        }
    ],
}


def test_optimizer_states_flag_disabled_failed_and_missing() -> None:
    compaction, retention, orphans = optimizer_states(SUSPENDED)
    assert compaction.enabled is False and compaction.last_run is not None
    assert compaction.last_run.started == datetime(2026, 11, 21, 11, 0, tzinfo=UTC)
    assert compaction.flags == ["disabled", "last run failed"]
    assert retention.flags == [] and retention.last_run is not None
    assert retention.last_run.status == "completed"
    assert not orphans.found and orphans.flags == ["missing"]
    assert orphans.problem == "EntityNotFoundException: no optimizer"
    # An optimizer neither returned nor failed is missing too; one never run is fine.
    fresh = optimizer_states({"TableOptimizers": [_optimizer("compaction", True)]})
    assert [s.flags for s in fresh] == [[], ["missing"], ["missing"]]
    assert fresh[0].last_run is None


def test_optimizers_are_read_in_one_call_and_a_refusal_is_reported() -> None:
    from botocore.exceptions import ClientError

    calls: list[dict[str, Any]] = []

    class Glue:
        def batch_get_table_optimizer(self, **kwargs: Any) -> dict[str, Any]:
            calls.append(kwargs)
            return SUSPENDED

    found = read_optimizers(Glue(), "db", "events")
    assert found.available and [s.type for s in found.flagged] == [
        "compaction",
        "orphan_file_deletion",
    ]
    assert calls == [
        {"Entries": [{"databaseName": "db", "tableName": "events", "type": t}
                     for t in ("compaction", "retention", "orphan_file_deletion")]}
    ]  # fmt: skip

    class Refusing:
        def batch_get_table_optimizer(self, **_kwargs: Any) -> dict[str, Any]:
            error = {"Code": "AccessDeniedException", "Message": "not authorized"}
            raise ClientError({"Error": error}, "BatchGetTableOptimizer")

    refused = read_optimizers(Refusing(), "db", "events")
    assert not refused.available and refused.states == []
    assert "BatchGetTableOptimizer failed: An error occurred (AccessDeniedException)" in (
        refused.note
    )
    assert refused.note.endswith("(needs glue:BatchGetTableOptimizer)")


def test_optimizers_are_read_on_aws_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = write_local_run(tmp_path)
    local = resolve(INSTANCE, work_dir=tmp_path)
    assert status.table_optimizers(local) == not_available_locally()
    asked: list[str] = []

    class Glue:
        def batch_get_table_optimizer(self, **kwargs: Any) -> dict[str, Any]:
            asked.extend(e["databaseName"] + "." + e["tableName"] for e in kwargs["Entries"])
            return SUSPENDED

    def client(_self: Target, service: str, *_args: Any) -> Any:
        assert service == "glue"
        return Glue()

    monkeypatch.setattr(Target, "client", client)
    on_aws = Target(
        replace_fields(config, {"catalog": {"type": "glue"}}), "s3://a/job-config.json",
        contract.stack_name("orders", REGION), local=False,
    )  # fmt: skip
    found = status.table_optimizers(on_aws)
    assert found.available and len(found.states) == 3
    assert asked == [f"{config.database}.{contract.EVENTS_TABLE}"] * 3
    # A deployed config whose catalog is not Glue has no optimizers either.
    sql = Target(config, "x", "s", local=False)
    assert status.table_optimizers(sql) == not_available_locally()


def test_the_report_shows_and_flags_each_optimizer(tmp_path: Path, aws: None) -> None:
    config = write_local_run(tmp_path)
    make_stream(shards=1)
    write_batch(Path(config.checkpoint_location), 0, shards_offset(s0=None))
    target = resolve(INSTANCE, work_dir=tmp_path)
    args = status.parser().parse_args(["--instance", INSTANCE])
    local = status.collect(target, args, lambda: NOW)
    table = f"{config.database}.{config.table}"
    assert format_report(local).endswith(
        f"table optimizers (Glue, {table}): not available locally (the local run's catalog "
        "is SQLite; Glue table optimizers exist on AWS only)"
    )
    flagged = Optimizers(True, states=optimizer_states(SUSPENDED))
    report = dataclasses.replace(local, optimizers=flagged)
    text = format_report(report).split("\n\n")[-1].splitlines()
    assert text[:5] == [
        f"table optimizers (Glue, {table})",
        "  optimizer             enabled   last run               started                 ended"
        "                      state",
        "  compaction                 NO     failed  2026-11-21 11:00:00Z  2026-11-21 11:04:00Z"
        "  DISABLED, LAST RUN FAILED",
        "  retention                 yes  completed  2026-11-21 10:00:00Z  2026-11-21 11:00:00Z"
        "                         ok",
        "  orphan_file_deletion        -          -                     -                     -"
        "                    MISSING",
    ]
    rest = "\n".join(text[5:])
    assert "compaction: last error: Access Denied (Service: S3, Status Code: 403)" in rest
    assert "compaction disabled: Glue suspends an optimizer after repeated failed runs" in rest
    assert "orphan_file_deletion: EntityNotFoundException: no optimizer" in rest
    assert "orphan_file_deletion missing: the stack creates it" in rest
    raw = json.loads(to_json(report))["optimizers"]
    assert raw["available"] is True
    assert [s["flags"] for s in raw["states"]] == [
        ["disabled", "last run failed"],
        [],
        ["missing"],
    ]
    assert raw["states"][0]["last_run"]["started"] == "2026-11-21T11:00:00+00:00"
