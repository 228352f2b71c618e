"""``model.storage_uri``: where a path lives, and one small object read and
written at either place (a local file, an S3 object on moto in-process)."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from model.storage_uri import (
    is_s3,
    local_path,
    parse_s3_uri,
    read_object,
    read_object_if_present,
    write_object,
)


def test_s3_uris_and_local_paths_are_told_apart() -> None:
    assert parse_s3_uri("s3a://bucket/a/b") == ("bucket", "a/b")
    assert is_s3("s3://data/k") and not is_s3("/tmp/s3://x") and not is_s3("file:///tmp/x")
    assert local_path("file:///tmp/x") == "/tmp/x"
    with pytest.raises(ValueError, match="is not an s3://bucket/key URI"):
        parse_s3_uri("gs://bucket/key")


def test_a_local_object_is_replaced_whole_in_a_directory_made_for_it(tmp_path: Path) -> None:
    path = f"file://{tmp_path}/new/dir/names.json"
    write_object(path, b"first")
    write_object(path, b"second")
    assert read_object(path) == b"second"
    assert sorted(p.name for p in (tmp_path / "new" / "dir").iterdir()) == ["names.json"]
    with pytest.raises(FileNotFoundError):
        read_object(str(tmp_path / "absent"))


@mock_aws
def test_an_s3_object_round_trips_through_the_client() -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="data")
    write_object("s3://data/checkpoint/_exit", b"record", s3)
    assert s3.get_object(Bucket="data", Key="checkpoint/_exit")["Body"].read() == b"record"
    assert read_object("s3://data/checkpoint/_exit", s3) == b"record"
    with pytest.raises(ClientError):
        read_object("s3://data/absent", s3)


def test_a_missing_local_object_reads_as_none(tmp_path: Path) -> None:
    path = str(tmp_path / "lease")
    assert read_object_if_present(path) is None
    write_object(path, b"held")
    assert read_object_if_present(f"file://{path}") == b"held"


@mock_aws
def test_a_missing_s3_object_reads_as_none_and_other_errors_raise() -> None:
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket="data")
    assert read_object_if_present("s3://data/control/supervisor.json", s3) is None
    write_object("s3://data/control/supervisor.json", b"{}", s3)
    assert read_object_if_present("s3://data/control/supervisor.json", s3) == b"{}"
    with pytest.raises(ClientError, match="NoSuchBucket"):
        read_object_if_present("s3://absent-bucket/k", s3)


def test_parse_s3_uri() -> None:
    assert parse_s3_uri("s3://bucket/a/b.json") == ("bucket", "a/b.json")
    with pytest.raises(ValueError, match="not an s3://"):
        parse_s3_uri("/local/path")
