"""local.moto_server's shard patch (moto's answers, without its race or its
scans) and its request log."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.kinesis import models as kinesis_models

from local.moto_server import _LoggedApp, patch_kinesis

SHARD_METHODS = ("put_record", "get_records", "get_min_sequence_number", "get_max_sequence_number")
STREAM_METHODS = ("split_shard", "merge_shards", "get_shard_for_key")


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> object:
    """moto's Kinesis models, every method patch_kinesis replaces restored after the test."""
    for name in SHARD_METHODS:
        monkeypatch.setattr(kinesis_models.Shard, name, getattr(kinesis_models.Shard, name))
    for name in STREAM_METHODS:
        monkeypatch.setattr(kinesis_models.Stream, name, getattr(kinesis_models.Stream, name))
    return kinesis_models


def test_shard_reads_answer_as_stock_moto_does(models: object) -> None:
    stock_get = kinesis_models.Shard.get_records
    stock_min, stock_max = (
        kinesis_models.Shard.get_min_sequence_number,
        kinesis_models.Shard.get_max_sequence_number,
    )
    shard = kinesis_models.Shard(0, 0, 2**128)
    for i in range(30):
        shard.put_record(f"k{i}", "ZGF0YQ==", "")
    cases = [("0", 10), ("0", None), ("12", 7), ("29", 5), ("30", 5), ("45", 3)]
    expected = [stock_get(shard, last, limit) for last, limit in cases]

    patch_kinesis()
    for (last, limit), (records, end, lag) in zip(cases, expected, strict=True):
        mine, my_end, my_lag = kinesis_models.Shard.get_records(shard, last, limit)
        assert [r.sequence_number for r in mine] == [r.sequence_number for r in records]
        assert (my_end, my_lag) == (end, lag), (last, limit)
    middle = kinesis_models.Shard.get_records(shard, "12", 7)[0]
    assert [r.sequence_number for r in middle] == list(range(13, 20))
    assert (shard.get_min_sequence_number(), shard.get_max_sequence_number()) == (
        stock_min(shard),
        stock_max(shard),
    )

    fresh = kinesis_models.Shard(1, 0, 2**128)
    assert (fresh.get_min_sequence_number(), fresh.get_max_sequence_number()) == (0, 0)
    numbers = [fresh.put_record(f"k{i}", "ZGF0YQ==", "") for i in range(5)]
    assert numbers == ["1", "2", "3", "4", "5"]
    assert [r.sequence_number for r in fresh.get_records("2", None)[0]] == [3, 4, 5]
    assert shard.put_record("k", "ZGF0YQ==", "") == "31", "numbering goes on after stock puts"


def test_a_read_during_puts_never_fails_and_sees_a_prefix(models: object) -> None:
    patch_kinesis()
    shard = kinesis_models.Shard(0, 0, 2**128)
    total = 3_000

    def put_all() -> None:
        for i in range(total):
            shard.put_record(f"k{i}", "ZGF0YQ==", "")

    writer = threading.Thread(target=put_all)
    writer.start()
    reads = 0
    while writer.is_alive() or reads == 0:
        numbers = [r.sequence_number for r in shard.get_records("0", None)[0]]
        assert numbers == list(range(1, len(numbers) + 1))
        reads += 1
    writer.join()
    assert [r.sequence_number for r in shard.get_records("0", None)[0]] == list(range(1, total + 1))


def test_a_merge_leaves_the_records_in_its_parents_as_kinesis_does(models: object) -> None:
    """Stock moto re-puts both parents' records into the merged child, so a
    reader sees them twice; Kinesis leaves them in the closed parents."""
    patch_kinesis()
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name="us-east-1")
        kinesis.create_stream(StreamName="s", ShardCount=3)
        shards = kinesis.list_shards(StreamName="s")["Shards"]
        for shard in shards:
            key = shard["HashKeyRange"]["StartingHashKey"]
            for i in range(3):
                kinesis.put_record(
                    StreamName="s", Data=b"x", PartitionKey=f"{i}", ExplicitHashKey=key
                )
        first, second, third = (shard["ShardId"] for shard in shards)
        with pytest.raises(kinesis.exceptions.InvalidArgumentException, match="not adjacent"):
            kinesis.merge_shards(StreamName="s", ShardToMerge=first, AdjacentShardToMerge=third)
        # Either order of two adjacent shards merges (stock moto takes one only).
        kinesis.merge_shards(StreamName="s", ShardToMerge=third, AdjacentShardToMerge=second)
        after = {s["ShardId"]: s for s in kinesis.list_shards(StreamName="s")["Shards"]}
        (child,) = [s for s in after.values() if s.get("AdjacentParentShardId")]
        assert (child["ParentShardId"], child["AdjacentParentShardId"]) == (third, second)
        assert (
            child["HashKeyRange"]["StartingHashKey"] == shards[1]["HashKeyRange"]["StartingHashKey"]
        )
        assert child["HashKeyRange"]["EndingHashKey"] == shards[2]["HashKeyRange"]["EndingHashKey"]

        def records(shard_id: str) -> int:
            it = kinesis.get_shard_iterator(
                StreamName="s", ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
            )["ShardIterator"]
            return len(kinesis.get_records(ShardIterator=it)["Records"])

        assert [records(second), records(third), records(child["ShardId"])] == [3, 3, 0]
        assert "EndingSequenceNumber" in after[second]["SequenceNumberRange"]
        with pytest.raises(kinesis.exceptions.InvalidArgumentException, match="already"):
            kinesis.merge_shards(StreamName="s", ShardToMerge=second, AdjacentShardToMerge=third)


def test_the_request_log_records_each_answered_request_and_passes_the_body_on(
    tmp_path: Path,
) -> None:
    """With ``MOTO_REQUEST_LOG`` the server appends one line per request (what
    ``python -m bench.requests`` counts), and the app still reads the body."""
    seen: list[bytes] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["wsgi.input"].read())
        start_response("200 OK", [])
        return [b"{}"]

    log = tmp_path / "requests.log"
    logged = _LoggedApp(app, str(log))
    body = b"Action=PutMetricData&Version=2010-08-01"
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "HTTP_AUTHORIZATION": "Credential=AK/20261207/eu-west-1/monitoring/aws4_request, x",
    }
    assert logged(environ, lambda *a: None) == [b"{}"]
    assert seen == [body]
    (line,) = log.read_text().splitlines()
    entry = json.loads(line)
    assert (entry["service"], entry["api"], entry["status"]) == (
        "monitoring",
        "PutMetricData",
        "200",
    )
