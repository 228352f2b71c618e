"""``model.failure_store``: the claim-check store, a local directory and S3 on
moto in-process."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from model.failure_store import FailureStore, FailureStoreError, FailureStoreSettings


def test_a_local_store_writes_whole_objects_with_their_metadata(tmp_path: Path) -> None:
    store = FailureStore(FailureStoreSettings(str(tmp_path / "failures"), "r"))
    data = os.urandom(2_000)
    uri = store.put("s/sh/1", data, hashlib.sha256(data).hexdigest(), {"reason": "too_large"})
    assert uri == str(tmp_path / "failures" / "s" / "sh" / "1")
    assert store.get(uri) == data
    assert (tmp_path / "failures/s/sh/1.metadata.json").read_text() == '{"reason": "too_large"}'
    again = os.urandom(10)
    store.put("s/sh/1", again, hashlib.sha256(again).hexdigest(), {})
    assert store.get(uri) == again, "a replay overwrites the same object"
    assert sorted(p.name for p in (tmp_path / "failures/s/sh").iterdir()) == [
        "1",
        "1.metadata.json",
    ], "no temporary file left behind"


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket="data")
        yield client


def test_an_s3_store_puts_with_the_checksum_and_metadata(s3: Any) -> None:
    store = FailureStore(FailureStoreSettings("s3://data/failures/i/", "us-east-1"), lambda _s: s3)
    sent: list[dict[str, str]] = []
    s3.meta.events.register(
        "before-send.s3.PutObject", lambda request, **_: sent.append(dict(request.headers))
    )
    data = os.urandom(3_000)
    digest = hashlib.sha256(data).hexdigest()
    uri = store.put("s/sh/1", data, digest, {"reason": "malformed_json", "x": "ünïcode"})
    assert uri == "s3://data/failures/i/s/sh/1"
    assert store.get(uri) == data
    head = s3.head_object(Bucket="data", Key="failures/i/s/sh/1")
    assert head["Metadata"] == {"reason": "malformed_json", "x": "?n?code"}
    # S3 refuses a body whose SHA-256 differs from this header; moto neither
    # checks nor keeps it, so the test looks at the request itself.
    assert sent[0]["x-amz-checksum-sha256"] == base64.b64encode(bytes.fromhex(digest))
    with pytest.raises(FailureStoreError, match="claim-check get"):
        store.get("s3://data/failures/i/s/sh/404")
