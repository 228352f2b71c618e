"""Bad input and broken neighbours: poison pills, CloudWatch down. (Kafka down
is the budget case of test_supervisor.py: the same failing batch, then the
broker back and a restart that delivers everything.)"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

import pytest

from job.table.catalog import load_table
from local.emulators import Emulators, free_port
from producer.events import (
    DUPLICATE,
    FAILURE_KINDS,
    SampleRecord,
    malformed_record,
    valid_event,
)
from tests.e2e.conftest import MAX_RECORD_BYTES, MakeLocal, mix

OLD_DAY = date(2019, 3, 4)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def test_poison_pills_reach_the_topic_once_and_valid_neighbours_land(
    emulators: Emulators, make_local: MakeLocal
) -> None:
    local = make_local(emulators, shards=1)
    now = datetime.now(UTC)
    old = datetime(2019, 3, 4, 5, 6, 7, tzinfo=UTC)
    records: list[SampleRecord] = [valid_event("pill-000", now, nanos=1, offset="+09:00")]
    for index, kind in enumerate(FAILURE_KINDS, start=1):
        records.append(
            malformed_record(kind, f"pill-bad-{kind}", too_large_bytes=MAX_RECORD_BYTES + 512)
        )
        records.append(
            valid_event(f"pill-{index:03d}", now - timedelta(seconds=index), nanos=index)
        )
    first = records[0]
    records.append(SampleRecord(DUPLICATE, first.data, first.partition_key, first.event_id))
    records.append(valid_event("pill-old", old, nanos=999_999_999, offset="-05:30"))
    records.append(valid_event("pill-last", now, nanos=None))

    local.start_job()
    local.produce(records)
    local.wait_until_accounted(timeout=240)
    assert local.job is not None and local.job.running, "the query must keep running"
    assert local.stop_job() == 0, local.log_tail()

    rows = local.read_table(columns=("id", "occurred_at", "occurred_at_raw"))
    summary = local.summary(table_ids=[r["id"] for r in rows])
    topic = local.read_topic()
    assert summary.ok, summary.problems
    assert summary.failures_by_reason == dict.fromkeys(sorted(FAILURE_KINDS), 1)
    assert topic.records == len(FAILURE_KINDS), "each bad record exactly once on the topic"
    by_id = {r["id"]: r for r in rows}
    assert sorted(by_id) == sorted(
        [
            "pill-000",
            "pill-last",
            "pill-old",
            *(f"pill-{i:03d}" for i in range(1, len(FAILURE_KINDS) + 1)),
        ]
    )
    assert len(rows) == len(FAILURE_KINDS) + 3, "the re-sent id lands once"
    # 05:06:07 UTC is 23:36:07 the day before at -05:30: the partition is the UTC
    # date, the instant keeps microseconds (nanoseconds truncated), the raw text stays.
    assert by_id["pill-old"]["occurred_at_raw"] == "2019-03-03T23:36:07.999999999-05:30"
    assert by_id["pill-old"]["occurred_at"].isoformat() == "2019-03-04T05:06:07.999999"
    partitions = load_table(local.config).inspect.partitions().to_pylist()
    old_day = [
        p["record_count"] for p in partitions if p["partition"]["occurred_at_day"] == OLD_DAY
    ]
    assert old_day == [1], partitions
    reasons = {topic.reason_of(k) for k in topic.keys}
    assert reasons == set(FAILURE_KINDS)


def test_cloudwatch_down_keeps_the_job_processing(
    emulators: Emulators, make_local: MakeLocal
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    local = make_local(
        emulators,
        overrides={"metrics": {"endpoint_url": dead, "timeout_sec": 1, "max_attempts": 2}},
    )
    local.start_job()
    local.produce(mix(500, seed=31, prefix="cw-a", malformed_share=0.02))
    local.wait_until_accounted(timeout=240)
    # The first batch's metrics failed; the job must go on to the next one.
    local.produce(mix(500, seed=32, prefix="cw-b", malformed_share=0.02))
    local.wait_until_accounted(timeout=240)
    assert local.batches() >= 2
    assert local.job is not None and local.job.running
    assert local.stop_job() == 0, local.log_tail()
    log = local.log_path.read_text(encoding="utf-8", errors="replace")
    assert "CloudWatch put_metric_data failed" in log, "the metrics failure must be logged"
    counted = re.search(r"metrics: (\d+) published, (\d+) failed calls", log)
    assert counted is not None, "the failures must be counted"
    assert int(counted.group(1)) == 0
    assert int(counted.group(2)) >= 2
    summary = local.summary()
    assert summary.ok, summary.problems
    assert summary.figures.metrics_published == 0, "nothing reached the real (moto) CloudWatch"
