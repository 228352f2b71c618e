"""PutRecords with per-entry re-sends and bounded backoff (fakes and in-process moto)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from scripts.reprocess.hook import FailedRecord
from scripts.reprocess.kinesis import KinesisCallError, put_entries
from scripts.reprocess.plan import Entry

THROTTLED = "ProvisionedThroughputExceededException"


def entries(n: int) -> list[Entry]:
    return [
        Entry(
            FailedRecord(
                data=b"orig",
                reason="malformed_json",
                headers=(("partition_key", f"pk-{i}"),),
                key=f"s/shardId-0/{i}",
                partition=0,
                offset=i,
            ),
            f'{{"n":{i}}}'.encode(),
        )
        for i in range(n)
    ]


class ScriptedKinesis:
    """Answers each call from a script: per call, the request indexes to refuse
    (by position in that call) or an exception to raise."""

    def __init__(self, script: list[set[int] | Exception]) -> None:
        self.script = script
        self.calls: list[list[dict[str, Any]]] = []
        self.sequence = 0

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803
        self.calls.append(Records)
        step = self.script[len(self.calls) - 1] if len(self.calls) <= len(self.script) else set()
        if isinstance(step, Exception):
            raise step
        results: list[dict[str, Any]] = []
        for index, _ in enumerate(Records):
            if index in step:
                results.append({"ErrorCode": THROTTLED, "ErrorMessage": "Rate exceeded for shard"})
            else:
                self.sequence += 1
                results.append({"ShardId": "shardId-0", "SequenceNumber": str(self.sequence)})
        return {"FailedRecordCount": len(step), "Records": results}


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": code}}, "PutRecords")


def test_only_refused_entries_are_sent_again_with_backoff() -> None:
    batch = entries(5)
    client = ScriptedKinesis([{1, 3}, {0}])
    sleeps: list[float] = []
    outcome = put_entries(client, "s", batch, sleep=sleeps.append)
    assert [[r["PartitionKey"] for r in call] for call in client.calls] == [
        ["pk-0", "pk-1", "pk-2", "pk-3", "pk-4"],
        ["pk-1", "pk-3"],
        ["pk-1"],  # index 0 of the second call
    ]
    assert sorted(e.record.offset for e in outcome.accepted) == [0, 1, 2, 3, 4]
    assert outcome.failed == []
    assert (outcome.calls, outcome.retried_entries) == (3, 3)
    assert sleeps == [0.1, 0.2]


def test_the_fixed_bytes_are_sent_not_the_original() -> None:
    client = ScriptedKinesis([])
    put_entries(client, "s", entries(1))
    assert client.calls == [[{"Data": b'{"n":0}', "PartitionKey": "pk-0"}]]


def test_refusals_after_the_last_attempt_fail_with_the_error() -> None:
    batch = entries(3)
    client = ScriptedKinesis([{2}, {0}, {0}, {0}])
    sleeps: list[float] = []
    outcome = put_entries(client, "s", batch, max_attempts=4, sleep=sleeps.append)
    assert [e.record.offset for e in outcome.accepted] == [0, 1]
    assert [e.record.offset for e in outcome.failed] == [2]
    assert outcome.last_error == f"{THROTTLED}: Rate exceeded for shard"
    assert outcome.calls == 4
    assert sleeps == [0.1, 0.2, 0.4]


def test_a_throttled_call_counts_as_an_attempt_for_every_entry() -> None:
    client = ScriptedKinesis([client_error(THROTTLED), set()])
    outcome = put_entries(client, "s", entries(2), sleep=lambda _: None)
    assert len(client.calls) == 2
    assert len(client.calls[1]) == 2
    assert len(outcome.accepted) == 2


def test_a_call_that_keeps_being_throttled_fails_every_entry() -> None:
    client = ScriptedKinesis([client_error(THROTTLED)] * 3)
    outcome = put_entries(client, "s", entries(2), max_attempts=3, sleep=lambda _: None)
    assert outcome.accepted == []
    assert len(outcome.failed) == 2
    assert outcome.last_error.startswith(f"{THROTTLED} (whole call)")


def test_an_error_a_retry_does_not_fix_propagates_at_once() -> None:
    client = ScriptedKinesis([client_error("ResourceNotFoundException")])
    with pytest.raises(KinesisCallError, match=r"stream s failed \(ResourceNotFoundException\)"):
        put_entries(client, "s", entries(2), sleep=lambda _: None)
    assert len(client.calls) == 1


def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_attempts=0"):
        put_entries(ScriptedKinesis([]), "s", entries(1), max_attempts=0)


@pytest.fixture
def moto_stream() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("kinesis", region_name="eu-west-1")
        client.create_stream(StreamName="reprocess-unit", ShardCount=1)
        yield client


def test_records_land_on_a_real_api_with_their_partition_keys(moto_stream: Any) -> None:
    batch = entries(3)
    outcome = put_entries(moto_stream, "reprocess-unit", batch)
    assert len(outcome.accepted) == 3 and outcome.calls == 1
    shard = moto_stream.list_shards(StreamName="reprocess-unit")["Shards"][0]["ShardId"]
    iterator = moto_stream.get_shard_iterator(
        StreamName="reprocess-unit", ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    got = moto_stream.get_records(ShardIterator=iterator)["Records"]
    assert [(r["Data"], r["PartitionKey"]) for r in got] == [
        (b'{"n":0}', "pk-0"),
        (b'{"n":1}', "pk-1"),
        (b'{"n":2}', "pk-2"),
    ]
