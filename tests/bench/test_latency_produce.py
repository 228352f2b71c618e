"""bench/latency_produce.py: the producers' schedule and their put times."""

from __future__ import annotations

import json
from typing import Any

from bench.latency_produce import STREAM, produce, put_ids
from producer.events import MixSpec, generate, now_utc
from tests.child_process import probe


class FakeKinesis:
    def __init__(self, stream: str = STREAM) -> None:
        self.stream = stream
        self.calls: list[int] = []
        self.data: list[bytes] = []

    def put_records(self, StreamName: str, Records: list[dict[str, Any]]) -> dict[str, Any]:  # noqa: N803 (boto3's names)
        assert StreamName == self.stream
        self.calls.append(len(Records))
        self.data.extend(r["Data"] for r in Records)
        return {"FailedRecordCount": 0, "Records": [{"SequenceNumber": "1"} for _ in Records]}


def test_records_go_in_calls_of_a_tenth_of_the_rate_and_each_valid_id_gets_its_first_put() -> None:
    records = generate(MixSpec(count=250, id_prefix="p", seed=1), now_utc())
    client = FakeKinesis()
    puts: dict[str, float] = {}

    seconds = produce(client, records, 1_000, puts)

    assert client.calls == [100, 100, 50]
    valid = {r.event_id for r in records if r.event_id is not None and not r.is_failure}
    assert set(puts) == valid and valid
    # 250 records at 1,000/s: the last call is due at 0.2 s.
    assert seconds >= 0.2


def test_the_producer_child_loads_no_spark() -> None:
    """A spawned child imports this module first: no JVM client library, no bench.framework."""
    code = (
        "import sys, bench.latency_produce; "
        "print(sorted(m for m in ('pyspark', 'bench.framework', 'job') if m in sys.modules))"
    )
    assert probe(code).strip() == "[]"


def test_bare_ids_go_on_the_same_schedule_numbered_from_first() -> None:
    """bench.efo's producer: ``{"id": "e<n>"}`` records, the same calls of a
    tenth of the rate, every id noted with its put time."""
    client = FakeKinesis("bench-efo")

    seconds, puts = put_ids(client, "bench-efo", 40, 250, 1_000)

    assert client.calls == [100, 100, 50]
    ids = [json.loads(data)["id"] for data in client.data]
    assert ids == [f"e{n}" for n in range(40, 290)]
    assert list(puts) == ids
    assert seconds >= 0.2
