"""bench/old_reader.py: the previous reader still reads on the driver, with
today's reader's shard tracking (no Spark: driven as Spark drives a
SimpleDataSourceStreamReader, against in-process moto)."""

from __future__ import annotations

import pickle
from pathlib import Path

import boto3
from moto import mock_aws
from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper, _streamReader

from bench.old_reader import FORMAT_NAME, KinesisDataSource, KinesisStreamReader
from job.sources import kinesis_python
from job.sources.kinesis_options import parse_options
from job.sources.schema import SOURCE_SCHEMA

STREAM = "old-reader"
REGION = "us-east-1"


def test_read_returns_every_record_and_replays_the_same_rows(tmp_path: Path) -> None:
    with mock_aws():
        kinesis = boto3.client("kinesis", region_name=REGION)
        kinesis.create_stream(StreamName=STREAM, ShardCount=2)
        for i in range(10):
            kinesis.put_record(StreamName=STREAM, Data=f"r{i}".encode(), PartitionKey=f"k{i}")
        reader = KinesisStreamReader(
            parse_options(
                {
                    "kinesis.streamName": STREAM,
                    "kinesis.region": REGION,
                    "kinesis.startingPosition": "TRIM_HORIZON",
                    "kinesis.metadataPath": str(tmp_path / "ends"),
                }
            )
        )
        assert isinstance(reader.planner, kinesis_python.KinesisStreamReader)

        start = reader.initialOffset()
        assert reader.initialOffset() == start  # pinned once
        batches, end = reader.read(start)
        rows = [row for batch in batches for row in batch.to_pylist()]
        replayed = [row for b in reader.readBetweenOffsets(start, end) for row in b.to_pylist()]
        idle, same = reader.read(end)

    assert sorted(bytes(r["data"]) for r in rows) == sorted(f"r{i}".encode() for i in range(10))
    assert replayed == rows
    assert list(idle) == [] and same is end


def test_an_executor_s_copy_carries_the_options_only(tmp_path: Path) -> None:
    options = parse_options(
        {"kinesis.streamName": STREAM, "kinesis.region": REGION, "kinesis.metadataPath": "/x"}
    )
    reader = KinesisStreamReader(options)

    copy = pickle.loads(pickle.dumps(reader))

    assert copy.options == options
    assert copy.planner is not reader.planner
    assert copy.planner.options == options


def test_spark_gets_the_simple_reader_under_today_s_schema() -> None:
    """How Spark picks the reader (pyspark.sql.datasource_internal): streamReader
    first, simpleStreamReader when that is not implemented."""
    source = KinesisDataSource(
        {"kinesis.streamName": STREAM, "kinesis.region": REGION, "kinesis.metadataPath": "/x"}
    )

    reader = _streamReader(source, SOURCE_SCHEMA)

    assert isinstance(reader, _SimpleStreamReaderWrapper)
    assert isinstance(reader.simple_reader, KinesisStreamReader)
    assert KinesisDataSource.name() == FORMAT_NAME != kinesis_python.FORMAT_NAME
    assert source.schema() == SOURCE_SCHEMA
