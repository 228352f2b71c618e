"""How large a failure record may be on its Kafka topic: ONE number for the
producer, the topic and the local broker.

The failure topic carried a record's original bytes in full, and Kinesis
accepts records up to 1 MiB by default (up to 10 MiB when a stream's maximum
record size is raised,
https://docs.aws.amazon.com/streams/latest/dev/large-records.html), while
librdkafka refuses a message above its ``message.max.bytes`` (1,000,000 by
default) and the broker a record batch above the topic's ``max.message.bytes``
(Kafka's default 1,048,588). A valid 1.04 MB Kinesis record that failed to
parse failed its batch for ever. So the failure topic never carries a large
original: above :attr:`FailureLimits.inline_max_bytes` the original goes to
the claim-check store (:mod:`model.failure_store`) and the topic gets a
pointer (:mod:`model.claim_check`).

Every size is derived from one setting, the instance's
``kafka.max_message_bytes`` (``cdk.json``; the job's ``kafka.max_message_bytes``
carries it): the producer's ``message.max.bytes`` and ``batch.size`` are
that value, the topic's ``max.message.bytes`` is that value plus
:data:`RECORD_BATCH_ALLOWANCE`, and the local broker's topic gets the same
topic config. No heavy imports: the CDK app, ``make preflight`` and the
executors all import this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# librdkafka's own default for message.max.bytes (range 1000 .. 1000000000):
# https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md
LIBRDKAFKA_DEFAULT_MESSAGE_MAX_BYTES: Final = 1_000_000
# Apache Kafka's broker default message.max.bytes (the largest record batch,
# after compression); MSK's default configuration does not change it, "for
# properties that aren't in this table, Amazon MSK uses the defaults associated
# with your version of Apache Kafka"
# (https://docs.aws.amazon.com/msk/latest/developerguide/msk-default-configuration.html).
KAFKA_DEFAULT_MESSAGE_MAX_BYTES: Final = 1_048_588
# What the topic allows above the producer's limit: a record batch adds its
# framing (a 61-byte batch header, a few varints per record) to the messages,
# and librdkafka "may exceed the maximum size by one message" per request
# (CONFIGURATION.md above). The two defaults differ by exactly this much.
RECORD_BATCH_ALLOWANCE: Final = (
    KAFKA_DEFAULT_MESSAGE_MAX_BYTES - LIBRDKAFKA_DEFAULT_MESSAGE_MAX_BYTES
)

DEFAULT_MAX_MESSAGE_BYTES: Final = LIBRDKAFKA_DEFAULT_MESSAGE_MAX_BYTES
# Above this the topic would ask more than a broker on Kafka's defaults is set
# for; a larger original goes to the claim-check store anyway.
MAX_MAX_MESSAGE_BYTES: Final = LIBRDKAFKA_DEFAULT_MESSAGE_MAX_BYTES
# Below this a pointer record (key, bounded headers, excerpt: at most
# POINTER_RECORD_MAX_BYTES) would not fit in the inline share.
MIN_MAX_MESSAGE_BYTES: Final = 131_072

# The bytes of the original a pointer record keeps as its value (enough to
# recognise the record; the reprocess command reads the whole original back).
EXCERPT_BYTES: Final = 1_024
# Each header value is cut to this many bytes (the failure message is free
# text; the coordinates are far shorter: a partition key is at most 256
# characters, a sequence number 128 digits).
HEADER_VALUE_MAX_BYTES: Final = 1_024
# An upper bound of a pointer record: key, up to 16 bounded headers, excerpt.
POINTER_RECORD_MAX_BYTES: Final = (
    3 * HEADER_VALUE_MAX_BYTES + 16 * (64 + HEADER_VALUE_MAX_BYTES) + EXCERPT_BYTES
)
# The share of the producer's limit one inline record may take: a whole
# record (key + value + headers) of at most a quarter of message.max.bytes
# stays far below every limit, whatever the framing, and a burst of large
# failures fills a producer batch with four records or more, not one.
INLINE_SHARE: Final = 4


class FailureLimitsError(ValueError):
    """A size setting that cannot work; the message names the field."""


@dataclass(frozen=True)
class FailureLimits:
    """The sizes derived from ``max_message_bytes`` (``kafka.max_message_bytes``)."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    field: str = "kafka.max_message_bytes"

    def __post_init__(self) -> None:
        value = self.max_message_bytes
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not MIN_MAX_MESSAGE_BYTES <= value <= MAX_MAX_MESSAGE_BYTES
        ):
            raise FailureLimitsError(
                f"{self.field}: bad value {value!r}; allowed: an integer from "
                f"{MIN_MAX_MESSAGE_BYTES:,} (a claim-check pointer must fit in a quarter of it) "
                f"to {MAX_MAX_MESSAGE_BYTES:,} (the topic then allows "
                f"{KAFKA_DEFAULT_MESSAGE_MAX_BYTES:,}, Kafka's broker default)"
            )

    @property
    def producer_message_max_bytes(self) -> int:
        """librdkafka's ``message.max.bytes`` (and ``batch.size``)."""
        return self.max_message_bytes

    @property
    def topic_max_message_bytes(self) -> int:
        """The topic's ``max.message.bytes`` (MSK topic, local broker topic)."""
        return self.max_message_bytes + RECORD_BATCH_ALLOWANCE

    @property
    def inline_max_bytes(self) -> int:
        """The largest failure record (key + value + headers) sent with its
        original bytes; a larger one is claim-checked."""
        return self.max_message_bytes // INLINE_SHARE


def limit_problems(
    *, producer_message_max_bytes: int, topic_max_message_bytes: int, field: str
) -> list[str]:
    """Why a producer limit and a topic limit cannot work together (empty: they
    can). The producer must stay below the topic by the record batch framing,
    or a batch the producer accepts is refused by the broker: the batch fails
    and is replayed for ever."""
    problems: list[str] = []
    if producer_message_max_bytes + RECORD_BATCH_ALLOWANCE > topic_max_message_bytes:
        problems.append(
            f"{field}: the producer's message.max.bytes {producer_message_max_bytes:,} + "
            f"{RECORD_BATCH_ALLOWANCE:,} (record batch framing) is above the topic's "
            f"max.message.bytes {topic_max_message_bytes:,}; derive both from "
            "model.failure_limits.FailureLimits"
        )
    inline = producer_message_max_bytes // INLINE_SHARE
    if inline < POINTER_RECORD_MAX_BYTES:
        problems.append(
            f"{field}: a claim-check pointer record may take {POINTER_RECORD_MAX_BYTES:,} "
            f"bytes, more than the inline share {inline:,} of message.max.bytes "
            f"{producer_message_max_bytes:,}"
        )
    return problems


def check_limits(
    *, producer_message_max_bytes: int, topic_max_message_bytes: int, field: str
) -> None:
    """:func:`limit_problems`, raised as a :class:`FailureLimitsError`."""
    problems = limit_problems(
        producer_message_max_bytes=producer_message_max_bytes,
        topic_max_message_bytes=topic_max_message_bytes,
        field=field,
    )
    if problems:
        raise FailureLimitsError("\n".join(problems))
