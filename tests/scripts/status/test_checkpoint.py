"""scripts.status.checkpoint: the job's checkpoint files (offsets, commits) read back,
on local files and on S3 (in-process moto)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import boto3
import pytest

from scripts.status.checkpoint import (
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
from tests.scripts.local_runs import SHARD0, SHARD1, shards_offset, write_batch

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
