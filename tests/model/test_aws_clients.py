"""The one AWS client factory: the limits it is given are the limits its calls
have, every caller passes the bounds it had before, and a client works
(moto's in-process ``mock_aws``, no server)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from job.cloudwatch import CloudWatchPublisher
from job.driver import s3_client_for
from job.sources.kinesis_fetch import make_client
from job.sources.kinesis_options import ReaderOptions
from local.metrics import cloudwatch_client
from model import aws_clients
from model.aws_clients import ClientLimits, client
from model.config import JobConfig, KafkaOptions
from model.kafka_settings import resolve_bootstrap_servers
from producer.stream_writer import kinesis_client
from scripts.redeploy import CLIENT_LIMITS


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.delenv("AWS_RETRY_MODE", raising=False)
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    with mock_aws():
        yield


def _bounds(made: Any) -> tuple[float, float, dict[str, Any]]:
    config = made.meta.config
    return config.connect_timeout, config.read_timeout, config.retries


def test_the_client_has_the_given_limits_and_works(aws: None) -> None:
    limits = ClientLimits(connect_timeout_sec=3, read_timeout_sec=7, retries=2)
    s3 = client("s3", limits, region="eu-west-1")
    assert _bounds(s3) == (3, 7, {"mode": "standard", "total_max_attempts": 3})
    assert s3.meta.region_name == "eu-west-1"
    s3.create_bucket(
        Bucket="limits-bucket", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}
    )
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["limits-bucket"]


def test_zero_retries_is_one_attempt_and_the_pool_can_be_sized(aws: None) -> None:
    limits = ClientLimits(1, 2, retries=0, max_pool_connections=16)
    kinesis = client("kinesis", limits, region="us-east-1", endpoint_url="http://127.0.0.1:1")
    assert kinesis.meta.config.retries["total_max_attempts"] == 1
    assert kinesis.meta.config.max_pool_connections == 16
    assert kinesis.meta.endpoint_url == "http://127.0.0.1:1"


def test_pinned_credentials_win_over_the_environment(aws: None) -> None:
    made = client(
        "sts",
        aws_clients.JOB_S3,
        region="us-east-1",
        credentials={"aws_access_key_id": "pinned", "aws_secret_access_key": "s"},
    )
    assert made._request_signer._credentials.access_key == "pinned"
    with pytest.raises(ValueError, match="'AWS_ACCESS_KEY_ID' is not one of"):
        client("sts", aws_clients.JOB_S3, credentials={"AWS_ACCESS_KEY_ID": "x"})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"connect_timeout_sec": 0, "read_timeout_sec": 1, "retries": 0}, "connect_timeout_sec"),
        ({"connect_timeout_sec": 1, "read_timeout_sec": -1, "retries": 0}, "read_timeout_sec"),
        ({"connect_timeout_sec": 1, "read_timeout_sec": 1, "retries": -1}, "retries"),
        (
            {
                "connect_timeout_sec": 1,
                "read_timeout_sec": 1,
                "retries": 0,
                "max_pool_connections": 0,
            },
            "max_pool_connections",
        ),
    ],
)
def test_unbounded_or_nonsense_limits_are_rejected(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ClientLimits(**kwargs)


def test_callers_keep_their_bounds(aws: None) -> None:
    """What each client had before the factory: the job's from its config."""

    config = JobConfig.from_dict(
        {
            "instance_id": "i",
            "region": "us-east-1",
            "stream_name": "s",
            "database": "d",
            "checkpoint_location": "/tmp/unused-checkpoint",
            "kafka": {"topic": "t", "bootstrap_servers": "127.0.0.1:9092"},
        }
    )
    assert _bounds(s3_client_for(config)) == (10, 10, {"mode": "standard", "total_max_attempts": 4})

    publisher = CloudWatchPublisher.for_config(
        "i", "us-east-1", None, timeout_sec=4, max_attempts=2
    )
    try:
        cloudwatch = publisher._put.__self__
        assert _bounds(cloudwatch) == (4, 4, {"mode": "standard", "total_max_attempts": 3})
    finally:
        publisher.close(timeout=1)

    options = ReaderOptions(
        stream_name="s", region="us-east-1", connect_timeout_sec=2, read_timeout_sec=9
    )
    reader = make_client(options)
    assert _bounds(reader) == (2, 9, {"mode": "standard", "total_max_attempts": 1})
    assert reader.meta.config.max_pool_connections == 16

    assert _bounds(kinesis_client("us-east-1")) == (
        5,
        30,
        {"mode": "standard", "total_max_attempts": 6},
    )
    assert _bounds(cloudwatch_client("us-east-1", "http://127.0.0.1:1")) == (
        5,
        30,
        {"mode": "standard", "total_max_attempts": 4},
    )
    assert (CLIENT_LIMITS.connect_timeout_sec, CLIENT_LIMITS.read_timeout_sec) == (5, 30)
    assert CLIENT_LIMITS.retries == 3


def test_the_msk_lookup_goes_through_the_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple[str, ClientLimits, str | None]] = []

    class FakeKafka:
        def get_bootstrap_brokers(self, ClusterArn: str) -> dict[str, str]:  # noqa: N803
            return {"BootstrapBrokerStringSaslIam": "b-1:9098"}

    def fake_client(service: str, limits: ClientLimits, *, region: str | None = None) -> Any:
        made.append((service, limits, region))
        return FakeKafka()

    monkeypatch.setattr(aws_clients, "client", fake_client)
    options = KafkaOptions(
        topic="t", cluster_arn="arn:aws:kafka:eu-west-1:1:cluster/c/1", security="MSK_IAM"
    )
    assert resolve_bootstrap_servers(options, region="eu-west-1") == "b-1:9098"
    (service, limits, region), *_ = made
    assert (service, region) == ("kafka", "eu-west-1")
    assert (limits.connect_timeout_sec, limits.read_timeout_sec, limits.retries) == (5, 10, 3)
