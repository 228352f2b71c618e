"""local/failures.py: the harness's reader of the failure topic (on tansu)."""

from __future__ import annotations

from confluent_kafka import Producer

from local.emulators import Endpoints
from local.failures import ensure_topic, read_topic
from model.record import MALFORMED_JSON, NOT_UTF8, REASON_HEADER


def test_read_topic_sees_every_record_and_dedupes_by_key(endpoints: Endpoints) -> None:
    topic = "reader.test.failures"
    ensure_topic(endpoints.kafka_bootstrap, topic, partitions=2)
    ensure_topic(endpoints.kafka_bootstrap, topic, partitions=2)  # idempotent
    kafka = Producer({"bootstrap.servers": endpoints.kafka_bootstrap, "enable.idempotence": True})
    for round_ in range(2):  # a replayed batch sends its failures again
        for i in range(150):
            reason = NOT_UTF8 if i % 3 == 0 else MALFORMED_JSON
            kafka.produce(
                topic, key=f"k{i}", value=b"v", headers=[(REASON_HEADER, reason.encode())]
            )
        assert kafka.flush(30) == 0, f"round {round_} not delivered"
    contents = read_topic(endpoints.kafka_bootstrap, topic)
    assert contents.records == 300
    assert len(contents.keys) == 150
    assert contents.counts_by_reason() == {MALFORMED_JSON: 100, NOT_UTF8: 50}
