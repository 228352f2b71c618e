"""scripts.produce: the make run producer aimed at an instance (in-process moto)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local.emulators import Endpoints
from local.harness import LocalInstance, Observation
from local.summary import RunFigures, summarize
from model import contract
from producer import local_run, producer
from scripts import produce
from tests.fixtures import SCHEMAS_CDK_JSON
from tests.scripts.local_runs import EXAMPLE_CDK_JSON, INSTANCE, REGION, STREAM, write_local_run


@pytest.fixture
def stream() -> Iterator[Any]:
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name=REGION)
        kinesis.create_stream(StreamName=STREAM, ShardCount=2)
        yield kinesis


def records_on(kinesis: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for shard in kinesis.list_shards(StreamName=STREAM)["Shards"]:
        iterator = kinesis.get_shard_iterator(
            StreamName=STREAM, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        found += kinesis.get_records(ShardIterator=iterator, Limit=10_000)["Records"]
    return found


def test_produce_puts_the_mix_on_the_instances_stream(stream: Any, tmp_path: Path) -> None:
    out = io.StringIO()
    report_path = tmp_path / "report.json"
    args = ["--instance", INSTANCE, "--count", "200", "--rate", "0", "--report", str(report_path)]
    assert produce.main(args, out) == 0
    summary = json.loads(out.getvalue())
    assert summary["stream"] == STREAM and summary["records"] == 200
    assert summary["counts"] == {
        "duplicate": 10, "malformed_json": 1, "missing_field": 1, "wrong_type": 1,
        "not_utf8": 1, "valid": 186,
    }  # fmt: skip
    assert summary["id_prefix"].startswith("orders-")
    on_stream = records_on(stream)
    assert len(on_stream) == 200
    last = summary["last_sequence_by_shard"]
    assert {r["SequenceNumber"] for r in on_stream} >= set(last.values())
    full = json.loads(report_path.read_text())
    assert len(full["ids"]) == full["unique_valid_ids"] == 186
    assert all(i.startswith(summary["id_prefix"]) for i in full["ids"])


def test_each_invocation_gets_its_own_ids(stream: Any) -> None:
    prefixes = set()
    for second in (1, 2):
        prefix = produce.default_id_prefix("orders", datetime(2026, 1, 2, 3, 4, second, tzinfo=UTC))
        prefixes.add(prefix)
    assert prefixes == {"orders-20260102030401", "orders-20260102030402"}
    out = io.StringIO()
    args = ["--instance", INSTANCE, "--count", "5", "--malformed-share", "0"]
    assert produce.main([*args, "--duplicate-share", "0", "--id-prefix", "mine"], out) == 0
    assert json.loads(out.getvalue())["id_prefix"] == "mine"
    assert {json.loads(r["Data"])["id"] for r in records_on(stream)} == {
        f"mine-{i:07d}" for i in range(5)
    }


def test_produce_to_a_local_run(stream: Any, tmp_path: Path) -> None:
    """--work-dir: the stream and endpoint of the run's own job config."""
    write_local_run(tmp_path)
    out = io.StringIO()
    args = ["--instance", INSTANCE, "--work-dir", str(tmp_path), "--count", "30"]
    assert produce.main(args, out) == 0
    assert json.loads(out.getvalue())["records"] == 30 == len(records_on(stream))


def test_errors_are_one_line_with_exit_2(
    stream: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert produce.main(["--instance", "nope-eu-west-1", "--count", "1"]) == 2
    assert "declared: orders-ap-northeast-2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # refused as it is parsed
        produce.main(["--instance", INSTANCE, "--malformed-share", "2"])
    assert refused.value.code == 2
    assert "argument --malformed-share: 2: allowed: 0..1" in capsys.readouterr().err
    assert produce.main(["--instance", "payments-ap-northeast-2", "--count", "1"]) == 2
    err = capsys.readouterr().err
    assert "stream streaming-payments-ap-northeast-2: not found" in err
    assert len(err.strip().splitlines()) == 1


def test_produce_follows_the_instances_own_event_fields() -> None:
    """An instance with its own ``job.event_fields`` gets events of that
    schema: payments events carry ``paymentId``, never the default ``id``."""

    region = "eu-west-1"
    stream_name = contract.stream_name("payments", region)
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name=region)
        kinesis.create_stream(StreamName=stream_name, ShardCount=1)
        out = io.StringIO()
        args = ["--instance", f"payments-{region}", "--cdk-json", str(SCHEMAS_CDK_JSON)]
        assert produce.main([*args, "--count", "20", "--malformed-share", "0"], out) == 0
        shard = kinesis.list_shards(StreamName=stream_name)["Shards"][0]["ShardId"]
        iterator = kinesis.get_shard_iterator(
            StreamName=stream_name, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        events = [
            json.loads(r["Data"]) for r in kinesis.get_records(ShardIterator=iterator)["Records"]
        ]
    assert len(events) == 20
    assert all("paymentId" in e and "id" not in e for e in events), events[0]


def test_a_run_accepts_and_counts_what_produce_puts_into_it(stream: Any, tmp_path: Path) -> None:
    """make produce --work-dir into a running make run
    records what it sends; the run expects those ids and failure keys, waits
    while a produce is under way, and its summary counts them (no
    "unexpected ids")."""

    config = write_local_run(tmp_path)
    local = LocalInstance(
        instance=None,
        root=tmp_path / INSTANCE,
        endpoints=Endpoints("http://127.0.0.1:1", "127.0.0.1:2"),
        config=config,
        shard_count=2,
    )
    assert local.expected_ids() == set() and local.outside() == []
    # Under way: the run does not stop meanwhile.
    pending = local_run.OutsideProduce("x-1", done=False, ids=frozenset({"x-0000001"}))
    local_run.write_outside(local_run.produced_dir(tmp_path, INSTANCE), pending)
    assert [o.done for o in local.outside()] == [False]
    assert local.expected_ids() == set(), "ids under way are not required yet"
    waiting = Observation(0, 0, 0, 0, 0, 0, job_running=True, outside_pending=1)
    assert not waiting.accounted and "make produce under way: 1" in waiting.line(INSTANCE)
    (local_run.produced_dir(tmp_path, INSTANCE) / "x-1.json").unlink()

    out = io.StringIO()
    args = ["--instance", INSTANCE, "--work-dir", str(tmp_path), "--count", "200"]
    assert produce.main(args, out) == 0
    [done] = local.outside()
    assert done.done and done.records == 200 and len(done.ids) == 186
    assert local.expected_ids() == set(done.ids)
    assert len(local.expected_failures()) == 4 == len(done.failures)
    # The table holds every valid id once, the topic every failure: PASS.
    figures = RunFigures(
        instance=INSTANCE,
        produced_records=done.records,
        outside_records=done.records,
        produced_by_kind=done.counts,
        expected_ids=frozenset(local.expected_ids()),
        expected_failures=local.expected_failures(),
        table_ids=sorted(done.ids),
        topic_reasons_by_key={k: [v] for k, v in done.failures.items()},
        topic_records=len(done.failures),
    )
    summary = summarize(figures)
    assert summary.ok, summary.problems
    assert any("of which from outside      200" in line for line in summary.lines())


def test_ops_producer_takes_the_stream_and_region_from_the_instance(
    stream: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m producer.producer --instance X`` needs no
    ``--stream``/``--region``; without ``--instance`` they are required."""

    args = ["--instance", INSTANCE, "--cdk-json", str(EXAMPLE_CDK_JSON), "--count", "12"]
    assert producer.main(args) == 0
    assert json.loads(capsys.readouterr().out)["stream"] == STREAM
    assert len(records_on(stream)) == 12
    with pytest.raises(SystemExit) as refused:
        producer.main(["--count", "1"])
    assert refused.value.code == 2
    assert "--stream and --region are required without --instance" in capsys.readouterr().err
