"""``model.failure_limits``: the producer's and the topic's size limits, their
defaults (librdkafka's and Kafka's own) and the error naming the field."""

from __future__ import annotations

import pytest

from model.failure_limits import (
    KAFKA_DEFAULT_MESSAGE_MAX_BYTES,
    POINTER_RECORD_MAX_BYTES,
    FailureLimitsError,
    check_limits,
    limit_problems,
)
from tests.model.test_claim_check import LIMITS


def test_the_defaults_are_librdkafkas_and_kafkas_own() -> None:
    assert LIMITS.producer_message_max_bytes == 1_000_000
    assert LIMITS.topic_max_message_bytes == KAFKA_DEFAULT_MESSAGE_MAX_BYTES == 1_048_588
    assert LIMITS.inline_max_bytes == 250_000
    assert LIMITS.inline_max_bytes >= POINTER_RECORD_MAX_BYTES
    assert not limit_problems(
        producer_message_max_bytes=LIMITS.producer_message_max_bytes,
        topic_max_message_bytes=LIMITS.topic_max_message_bytes,
        field="kafka.max_message_bytes",
    )


def test_a_producer_above_its_topic_is_refused_naming_the_field() -> None:
    with pytest.raises(FailureLimitsError, match=r"kafka\.max_message_bytes: the producer"):
        check_limits(
            producer_message_max_bytes=1_000_000,
            topic_max_message_bytes=1_000_000,
            field="kafka.max_message_bytes",
        )
