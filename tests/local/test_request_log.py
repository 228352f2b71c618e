"""local/request_log.py: each log line becomes the request it stands for, and
the per-batch counts and their serial share are plain arithmetic on them."""

from __future__ import annotations

import json

import pytest

from local import request_log
from local.request_log import Request

ROOT = "/w/orders"


def _strace(call: str, args: str, when: float = 10.0, tid: int = 7) -> str:
    return f"{tid} {when:.6f} {call}({args}) = 3"


def test_file_calls_become_the_s3_request_emrfs_makes_by_prefix() -> None:
    lines = [
        _strace("openat", f'AT_FDCWD, "{ROOT}/checkpoint/offsets/.7.tmp", O_WRONLY|O_CREAT, 0644'),
        _strace("rename", f'"{ROOT}/checkpoint/offsets/.7.tmp", "{ROOT}/checkpoint/offsets/7"'),
        _strace("openat", f'AT_FDCWD, "{ROOT}/checkpoint/state/0/1", O_RDONLY|O_DIRECTORY'),
        _strace("newfstatat", f'AT_FDCWD, "{ROOT}/stop", 0x7ff, 0'),
        _strace("unlink", f'"{ROOT}/checkpoint/_lease/old"'),
        _strace("openat", f'AT_FDCWD, "{ROOT}/warehouse/db/events/data/a.parquet", O_RDONLY'),
        # Spark's checksum of a state file is an object of its own (no leading dot)
        _strace(
            "rename",
            f'"{ROOT}/checkpoint/state/0/0/.3.changelog.crc.u.tmp", '
            f'"{ROOT}/checkpoint/state/0/0/3.changelog.crc"',
        ),
        # no S3 counterpart: Hadoop's checksum files, the SQLite catalog, outside the root
        _strace("openat", f'AT_FDCWD, "{ROOT}/checkpoint/offsets/.7.crc", O_WRONLY|O_CREAT'),
        _strace("openat", f'AT_FDCWD, "{ROOT}/checkpoint/state/0/0/.3.changelog.crc", O_WRONLY'),
        _strace("openat", f'AT_FDCWD, "{ROOT}/catalog.db", O_RDWR'),
        _strace("openat", 'AT_FDCWD, "/usr/lib/jvm/rt.jar", O_RDONLY'),
        "7 10.000001 <... openat resumed>) = 4",
    ]
    got = [(r.api, r.prefix) for r in request_log.from_strace(lines, ROOT)]
    assert got == [
        ("PutObject", "checkpoint"),
        ("CopyObject", "checkpoint"),
        ("DeleteObject", "checkpoint"),
        ("ListObjectsV2", "state"),
        ("HeadObject", "markers"),
        ("DeleteObject", "lease"),
        ("GetObject", "table/data"),
        ("CopyObject", "state"),
        ("DeleteObject", "state"),
    ]


def test_a_burst_of_stats_of_one_path_by_one_thread_is_one_head() -> None:
    """java.io.File stats once per attribute and mkdirs checks first: one
    Hadoop call, one HEAD on S3A; another thread's, or a later one, counts."""
    state = f'AT_FDCWD, "{ROOT}/checkpoint/state/0/1", 0x1, 0'
    lines = [
        _strace("newfstatat", state, 10.000),
        _strace("newfstatat", state, 10.001),
        _strace("mkdir", f'"{ROOT}/checkpoint/state/0/1", 0777', 10.002),
        _strace("newfstatat", state, 10.002, tid=8),
        _strace("newfstatat", state, 10.5),
    ]
    got = [(r.api, r.thread, r.t) for r in request_log.from_strace(lines, ROOT)]
    assert got == [
        ("HeadObject", "7", 10.0),
        ("HeadObject", "8", 10.002),
        ("HeadObject", "7", 10.5),
    ]


def test_a_table_metadata_file_read_is_a_get_table_and_a_write_an_update_table() -> None:
    meta = f"{ROOT}/warehouse/db/events/metadata/00003-x.metadata.json"
    lines = [
        _strace("openat", f'AT_FDCWD, "{meta}", O_RDONLY'),
        f'[pid  9] 11.5 openat(AT_FDCWD, "{meta}", O_WRONLY|O_CREAT|O_TRUNC, 0666 <unfinished ...>',
    ]
    got = [(r.service, r.api, r.prefix) for r in request_log.from_strace(lines, ROOT)]
    assert got == [
        ("s3", "GetObject", "table/metadata"),
        ("glue", "GetTable", ""),
        ("s3", "PutObject", "table/metadata"),
        ("glue", "UpdateTable", ""),
    ]


@pytest.mark.parametrize(
    "case",
    [
        ("kinesis", "POST", "/", "", "Kinesis_20131202.GetRecords", b"{}", "GetRecords"),
        (
            "monitoring",
            "POST",
            "/service/GraniteServiceVersion20100801/operation/PutMetricData",
            "",
            "",
            b"",
            "PutMetricData",
        ),
        ("monitoring", "POST", "/", "", "", b"Action=PutMetricData&Version=x", "PutMetricData"),
        ("s3", "GET", "/bucket", "list-type=2", "", b"", "ListObjectsV2"),
        ("s3", "GET", "/bucket/a/b", "", "", b"", "GetObject"),
        ("s3", "HEAD", "/bucket/a", "", "", b"", "HeadObject"),
        ("s3", "PUT", "/bucket/a", "", "", b"x", "PutObject"),
        ("s3", "POST", "/bucket", "delete", "", b"<Delete/>", "DeleteObjects"),
    ],
)
def test_the_api_of_a_request_by_protocol(case: tuple[str, str, str, str, str, bytes, str]) -> None:
    service, method, path, query, target, body, api = case
    got = request_log.api_name(service, method, path=path, query=query, target=target, body=body)
    assert got == api


def test_a_moto_log_line_round_trips_and_an_emulators_own_calls_are_left_out() -> None:
    environ = {
        "HTTP_AUTHORIZATION": (
            "AWS4-HMAC-SHA256 Credential=AK/20261207/eu-west-1/kinesis/aws4_request"
        ),
        "HTTP_X_AMZ_TARGET": "Kinesis_20131202.ListShards",
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/",
        "HTTP_USER_AGENT": "Boto3/1 job",
    }
    entry = request_log.moto_entry(environ, b"{}", "200 OK", 5.0, 5.25)
    assert (entry["service"], entry["api"], entry["status"], entry["ms"]) == (
        "kinesis",
        "ListShards",
        "200",
        250.0,
    )
    other = {**entry, "agent": "efo-front"}
    lines = [json.dumps(entry), json.dumps(other), ""]
    got = request_log.from_moto(lines, exclude_agents=("efo-front",))
    assert got == [Request(5.0, "kinesis", "ListShards", thread="Boto3/1 job")]


def test_per_batch_divides_the_window_by_its_batches_and_refuses_none() -> None:
    made = [Request(t, "s3", "PutObject", "checkpoint") for t in (1.0, 2.0, 3.0, 9.0)]
    made += [Request(2.5, "glue", "GetTable")]
    inside = request_log.window(made, 1.0, 9.0)
    assert request_log.per_batch(inside, 2) == {
        ("glue", "GetTable", ""): 0.5,
        ("s3", "PutObject", "checkpoint"): 1.5,
    }
    with pytest.raises(ValueError, match="at least one batch"):
        request_log.per_batch(inside, 0)


def test_serial_counts_every_driver_call_and_one_partition_or_shard_of_the_rest() -> None:
    counts = {
        ("s3", "PutObject", "checkpoint"): 4.0,
        ("glue", "GetTable", ""): 2.0,
        ("s3", "PutObject", "state"): 8.0,  # 4 partitions: 2 each, side by side
        ("kinesis", "GetRecords", ""): 6.0,  # 2 shards: 3 each
        ("kinesis", "ListShards", ""): 1.0,
        ("monitoring", "PutMetricData", ""): 1.0,  # a background thread
    }
    assert request_log.serial(counts, partitions=4, shards=2) == 4 + 2 + 2 + 3 + 1
