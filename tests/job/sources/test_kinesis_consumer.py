"""job.sources.kinesis_consumer without a network: the consumer registered,
or (the stack's) described by ARN, and awaited until ACTIVE."""

# The stubs mirror boto3's keyword names (ConsumerARN, StreamName, ...).
# ruff: noqa: N803

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from job.sources.kinesis_consumer import ensure_consumer
from job.sources.kinesis_options import CONSUMER_ARN, parse_options
from tests.fake_clock import FakeClock
from tests.job.source_helpers import EFO_OPTIONS as OPTIONS
from tests.job.source_helpers import client_error


class FakeConsumers:
    def __init__(self, statuses: list[str], exists: bool) -> None:
        self.statuses = statuses
        self.exists = exists
        self.registered: list[str] = []

    def describe_stream_summary(self, StreamName: str) -> Any:
        return {"StreamDescriptionSummary": {"StreamARN": f"arn:s/{StreamName}"}}

    def describe_stream_consumer(self, StreamARN: str, ConsumerName: str) -> Any:
        if not self.exists:
            raise client_error("ResourceNotFoundException")
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return {
            "ConsumerDescription": {
                "ConsumerARN": f"{StreamARN}/consumer/{ConsumerName}:1",
                "ConsumerStatus": status,
            }
        }

    def register_stream_consumer(self, StreamARN: str, ConsumerName: str) -> Any:
        self.registered.append(ConsumerName)
        self.exists = True
        return {}


def test_ensure_consumer_registers_once_and_waits_for_active() -> None:
    clock = FakeClock()
    client = FakeConsumers(["CREATING", "CREATING", "ACTIVE"], exists=False)
    arn = ensure_consumer(client, OPTIONS, sleep=clock.sleep, clock=clock)
    assert arn == "arn:s/s/consumer/c:1"
    assert client.registered == ["c"]
    assert clock.slept == [1.0, 1.0]


def test_ensure_consumer_describes_a_registered_one() -> None:
    client = FakeConsumers(["ACTIVE"], exists=True)
    assert ensure_consumer(client, OPTIONS).endswith("/consumer/c:1")
    assert client.registered == []


def test_ensure_consumer_is_bounded() -> None:
    clock = FakeClock()
    client = FakeConsumers(["CREATING"], exists=True)
    with pytest.raises(TimeoutError, match="still CREATING"):
        ensure_consumer(client, OPTIONS, sleep=clock.sleep, clock=clock, timeout=5)
    with pytest.raises(ValueError, match="consumerName"):
        ensure_consumer(client, replace(OPTIONS, consumer_name=None))


class StackConsumer:
    """Kinesis with the stack's consumer only describable by ARN; a
    registration is a failure of the test (the job must never register)."""

    def __init__(self, statuses: list[str], exists: bool = True) -> None:
        self.statuses = statuses
        self.exists = exists
        self.described: list[str] = []

    def describe_stream_consumer(self, ConsumerARN: str) -> Any:
        self.described.append(ConsumerARN)
        if not self.exists:
            raise client_error("ResourceNotFoundException")
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return {"ConsumerDescription": {"ConsumerARN": ConsumerARN, "ConsumerStatus": status}}

    def register_stream_consumer(self, **_: Any) -> Any:
        raise AssertionError("the job registered a consumer")


STACK_ARN = "arn:aws:kinesis:eu-west-1:1:stream/s/consumer/orders-eu-west-1-job:1700000000"


def test_the_stacks_consumer_is_described_by_arn_and_never_registered() -> None:
    """The stack owns the consumer; the job only waits for
    it to be ACTIVE, and a missing one stops the start naming the stack."""
    clock = FakeClock()
    client = StackConsumer(["CREATING", "ACTIVE"])
    options = replace(OPTIONS, consumer_arn=STACK_ARN)
    assert ensure_consumer(client, options, sleep=clock.sleep, clock=clock) == STACK_ARN
    assert client.described == [STACK_ARN, STACK_ARN]
    gone = StackConsumer(["ACTIVE"], exists=False)
    with pytest.raises(RuntimeError, match="the stack owns it"):
        ensure_consumer(gone, options, sleep=clock.sleep, clock=clock)


def test_the_consumer_arn_option_reaches_the_reader() -> None:
    raw = {
        "kinesis.streamName": "s",
        "kinesis.region": "eu-west-1",
        "kinesis.metadataPath": "/tmp/m",
        "kinesis.consumerType": "SubscribeToShard",
        "kinesis.consumerName": "c",
        CONSUMER_ARN: STACK_ARN,
    }
    assert parse_options(raw).consumer_arn == STACK_ARN
    polling = {**raw, "kinesis.consumerType": "GetRecords"}
    assert parse_options(polling).consumer_arn is None
