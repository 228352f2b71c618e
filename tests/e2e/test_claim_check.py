"""No single record can stop an instance: the real job, with the
AWS default ``max_record_bytes`` (1 MiB) and the default producer limit
(1,000,000 bytes), gets a malformed record of about 1 MiB and then valid
events. Before the claim-check store existed it exited 1 on
``MSG_SIZE_TOO_LARGE`` before any valid event landed, and failed the same way
on every restart.

Now the job keeps running, the valid events land, the failure is on the topic
with its reason and a pointer to its original in the claim-check store (a
bucket on the S3 emulator, as on AWS), and ``python -m scripts.reprocess``
reads the original back and puts exactly those bytes on the stream again.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import boto3
import pytest

from local.emulators import Emulators
from local.failures import TopicContents
from local.harness import LocalInstance
from model.claim_check import (
    ORIGINAL_BYTES_HEADER,
    ORIGINAL_SHA256_HEADER,
    ORIGINAL_URI_HEADER,
)
from model.failure_limits import DEFAULT_MAX_MESSAGE_BYTES, EXCERPT_BYTES
from model.polling import poll_until
from model.record import MALFORMED_JSON
from model.storage_uri import parse_s3_uri
from producer.events import SampleRecord, valid_event
from producer.local_run import FAKE_CREDENTIALS
from tests.e2e.conftest import MakeLocal
from tests.fixtures import EXAMPLE_CDK_JSON

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

ROOT: Final = Path(__file__).resolve().parents[2]
AWS_MAX_RECORD_BYTES: Final = 1_048_576  # the job's default, Kinesis' default record limit
BUCKET: Final = "claim-check-data"
# Below Kinesis' 1 MiB (with its partition key), above librdkafka's 1,000,000.
BIG_BYTES: Final = 1_040_000


def malformed_original() -> bytes:
    """Not JSON (a truncated object), about 1 MiB, not compressible to nothing."""
    body = os.urandom(BIG_BYTES // 2).hex().encode()
    return (b'{"id":"big-1","payload":"' + body)[:BIG_BYTES]


def s3(local: LocalInstance) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=local.endpoints.aws_url,
        region_name=local.config.region,
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def stream_records(local: LocalInstance) -> list[bytes]:
    """Every record the stream holds, every shard from its start."""
    kinesis = local.kinesis
    found: list[bytes] = []
    shards = kinesis.list_shards(StreamName=local.config.stream_name)["Shards"]
    for shard in shards:
        iterator = kinesis.get_shard_iterator(
            StreamName=local.config.stream_name,
            ShardId=shard["ShardId"],
            ShardIteratorType="TRIM_HORIZON",
        )["ShardIterator"]
        while iterator:
            page = kinesis.get_records(ShardIterator=iterator, Limit=1000)
            found.extend(bytes(r["Data"]) for r in page["Records"])
            if not page["Records"] and page.get("MillisBehindLatest", 0) == 0:
                break
            iterator = page.get("NextShardIterator")
    return found


def pointers(topic: TopicContents) -> dict[str, dict[str, str]]:
    return {k: h for k, h in topic.headers_by_key.items() if ORIGINAL_URI_HEADER in h}


def test_a_1_mib_malformed_record_neither_stops_the_job_nor_is_lost(
    emulators: Emulators, make_local: MakeLocal
) -> None:
    instance_id = "orders-ap-northeast-2"
    store = f"s3://{BUCKET}/failures/{instance_id}/"
    local = make_local(
        emulators,
        instance_id,
        shards=1,
        overrides={"max_record_bytes": AWS_MAX_RECORD_BYTES, "failure_store_location": store},
    )
    assert local.config.kafka.max_message_bytes == DEFAULT_MAX_MESSAGE_BYTES
    s3(local).create_bucket(
        Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": local.config.region}
    )
    original = malformed_original()
    assert AWS_MAX_RECORD_BYTES > len(original) > DEFAULT_MAX_MESSAGE_BYTES
    big = SampleRecord(MALFORMED_JSON, original, "pk-big")
    now = datetime.now(UTC)
    valid = [valid_event(f"cc-{i:02d}", now) for i in range(20)]
    local.start_job()
    produced = local.produce([big, *valid])
    (placed_big,) = [p for p in produced.placed if p.record is big]
    key = f"{local.config.stream_name}/{placed_big.shard_id}/{placed_big.sequence_number}"

    # The valid events behind it land, and the job is still running.
    local.wait_until_accounted(timeout=420)  # the first batch waits for the JVM
    ids = {str(r[local.id_column]) for r in local.read_table()}
    assert {f"cc-{i:02d}" for i in range(20)} <= ids
    assert local.job is not None and local.job.running, local.log_tail()

    # On the topic: the reason, a pointer and an excerpt, not the original.
    topic = local.read_topic()
    assert topic.reason_of(key) == MALFORMED_JSON
    headers = topic.headers_by_key[key]
    uri = headers[ORIGINAL_URI_HEADER]
    assert uri == f"{store}{key}"
    assert headers[ORIGINAL_BYTES_HEADER] == str(len(original))
    assert headers[ORIGINAL_SHA256_HEADER] == hashlib.sha256(original).hexdigest()
    assert topic.values_by_key[key] == original[:EXCERPT_BYTES]
    # In the claim-check store: the original, with its reason.
    bucket, object_key = parse_s3_uri(uri)
    stored = s3(local).get_object(Bucket=bucket, Key=object_key)
    assert stored["Body"].read() == original
    assert stored["Metadata"]["reason"] == MALFORMED_JSON

    # reprocess reads the original back and re-sends exactly those bytes.
    done = subprocess.run(
        [
            sys.executable, "-m", "scripts.reprocess",
            "--instance", local.name, "--cdk-json", str(EXAMPLE_CDK_JSON),
            "--kafka-bootstrap", local.endpoints.kafka_bootstrap,
            "--kinesis-endpoint-url", local.endpoints.aws_url,
            "--s3-endpoint-url", local.endpoints.aws_url,
            "--reason", MALFORMED_JSON,
        ],
        check=False, cwd=ROOT, env=dict(os.environ), capture_output=True, timeout=180,
    )  # fmt: skip
    output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    assert done.returncode == 0, output
    assert "figures: read=1 skipped=0 re-sent=1 rejected=0 failed=0" in output, output
    assert stream_records(local).count(original) == 2, "the original and its re-send"

    # The job fails the re-sent copy again (still not JSON), claim-checks it
    # under its new coordinates, and keeps running.
    def second_pointer() -> bool:
        return len(pointers(local.read_topic())) == 2

    poll_until(
        second_pointer,
        timeout=240,
        interval=1,
        on_timeout=lambda: TimeoutError(f"no second pointer on the topic\n{local.log_tail()}"),
    )
    found = pointers(local.read_topic())
    for headers in found.values():
        bucket, object_key = parse_s3_uri(headers[ORIGINAL_URI_HEADER])
        assert s3(local).get_object(Bucket=bucket, Key=object_key)["Body"].read() == original
    assert local.job.running, local.log_tail()
    assert local.stop_job() == 0, local.log_tail()
