"""producer.kinesis_put: requests within PutRecords' limits, responses read strictly, and
per-entry re-sends with bounded backoff (fakes and in-process moto)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from producer.kinesis_put import (
    Entry,
    KinesisCallError,
    PutLimitError,
    UnreadableResponseError,
    chunks,
    put_entries,
    split_response,
)

THROTTLED = "ProvisionedThroughputExceededException"


def entries(n: int) -> list[Entry[int]]:
    """``n`` entries whose source is their index (a failure record's offset, in reprocess)."""
    return [Entry(f'{{"n":{i}}}'.encode(), f"pk-{i}", i) for i in range(n)]


def entry(offset: int, size: int, key: str = "k") -> Entry[int]:
    return Entry(b"x" * size, key, offset)


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
    assert sorted(e.source for e in outcome.accepted) == [0, 1, 2, 3, 4]
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
    assert [e.source for e in outcome.accepted] == [0, 1]
    assert [e.source for e in outcome.failed] == [2]
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


# ------------------------------------------------------------------ requests (pure)


def test_chunks_keep_to_500_records() -> None:
    sizes = [len(b) for b in chunks(entry(i, 10) for i in range(1201))]
    assert sizes == [500, 500, 201]
    assert [len(b) for b in chunks((entry(i, 10) for i in range(7)), max_records=3)] == [3, 3, 1]


def test_chunks_keep_to_5_mib_partition_keys_included() -> None:
    # 1 MiB of data + a 1-byte key: five fit in 5 MiB only without their keys.
    big = [entry(i, 1024 * 1024 - 1) for i in range(11)]
    found = list(chunks(big))
    assert [len(b) for b in found] == [5, 5, 1]
    assert all(sum(e.size for e in b) <= 5 * 1024 * 1024 for b in found)
    just_over = [entry(i, 1024 * 1024) for i in range(5)]  # + key: 5 MiB + 5 bytes
    assert [len(b) for b in chunks(just_over)] == [4, 1]


def test_chunks_keep_read_order_and_every_entry() -> None:
    items = [entry(i, (i * 7919) % 300_000) for i in range(2000)]
    found = [e for b in chunks(items) for e in b]
    assert found == items


def test_chunks_refuse_a_bad_request_size() -> None:
    with pytest.raises(PutLimitError, match="max_records=501"):
        list(chunks([entry(0, 1)], max_records=501))


# ------------------------------------------------------------------ responses (pure)


def ok(n: int) -> dict[str, str]:
    return {"SequenceNumber": str(n), "ShardId": "shardId-000000000000"}


THROTTLED_RESULT = {
    "ErrorCode": "ProvisionedThroughputExceededException",
    "ErrorMessage": "slow down",
}


def test_split_response_selects_exactly_the_refused_entries() -> None:
    pending = [entry(i, 1) for i in range(4)]
    response = {
        "FailedRecordCount": 2,
        "Records": [ok(1), THROTTLED_RESULT, ok(2), {"ErrorCode": "InternalFailure"}],
    }
    split = split_response(pending, response)
    assert split.accepted == [pending[0], pending[2]]
    assert split.failed == [pending[1], pending[3]]
    assert split.errors == ["ProvisionedThroughputExceededException: slow down", "InternalFailure"]


def test_split_response_refuses_a_response_it_cannot_read() -> None:
    pending = [entry(i, 1) for i in range(2)]
    with pytest.raises(UnreadableResponseError, match="1 results for 2 records"):
        split_response(pending, {"FailedRecordCount": 0, "Records": [ok(1)]})
    with pytest.raises(
        UnreadableResponseError, match="FailedRecordCount=1 but 0 results carry an error"
    ):
        split_response(pending, {"FailedRecordCount": 1, "Records": [ok(1), ok(2)]})
    missing = split_response(pending, {"Records": [ok(1), {}]})
    assert missing.failed == [pending[1]]
