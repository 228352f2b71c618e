"""Fixtures shared by the model tests: S3 on moto in-process (``mock_aws``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("s3", region_name="us-east-1")


@pytest.fixture
def bucket(s3: Any) -> str:
    name = f"lease-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name
