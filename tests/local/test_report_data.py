"""The report's data: the dump format, the checkpoint, and the chart series (pure)."""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest

from local.metrics_dump import (
    Batch,
    DumpError,
    dump_from_json,
    dump_to_json,
    parse_offsets_file,
)
from local.report_data import (
    batch_durations,
    figures,
    input_rate,
    lag_from_checkpoint,
    processed_rate,
    source_lag,
)
from model import contract
from model.kinesis_offsets import ShardState
from tests.local.report_fixture import SHARD, T0, dump, instance, ms


def test_series_are_the_dumps_points_in_time_order() -> None:
    raw = dump()
    # Points may come in any order (GetMetricStatistics does not sort them).
    raw["instances"][0]["metrics"][contract.BATCH_DURATION_MS].reverse()
    run = dump_from_json(raw).runs[0]
    durations = batch_durations(run)
    assert durations.x == (10.0, 25.0, 30.0, 34.0)
    assert durations.y == (12000.0, 1500.0, 2500.0, 900.0)
    assert input_rate(run).y == (800.0, 120.0, 60.0, 0.0)
    assert processed_rate(run).y == (166.7, 333.3, 120.0, 0.0)


def test_figures_are_the_runs_numbers() -> None:
    fig = figures(dump_from_json(dump()).runs[0])
    assert fig.batches_committed == 2  # batch 2 is planned but not committed
    assert fig.batches_measured == 4
    assert fig.trigger_ms == 2000.0
    assert fig.batch_p50_ms == 1500.0
    assert fig.batch_max_ms == 12000.0
    assert fig.over_trigger == 2
    assert fig.latency_max_ms == 15000.0
    assert fig.input_rows == 2800
    assert fig.failure_records_metric == 50
    assert fig.failures_by_reason == {"malformed_json": 30, "not_utf8": 20}
    assert fig.failures_total == 50
    assert (fig.lag_origin, fig.lag_max_ms, fig.lag_max_records) == ("checkpoint", 22000.0, 5)


def test_source_lag_is_derived_from_the_checkpoint_offsets_and_arrivals() -> None:
    run = dump_from_json(dump()).runs[0]
    points = lag_from_checkpoint(run.batches, run.arrivals or {})
    # batch 0 (0 s) starts at TRIM_HORIZON: records 1-3 have arrived, the oldest at -3 s;
    # batch 1 (12 s) starts after record 2: 3-7 have arrived (8 comes at 20 s);
    # batch 2 (27 s) starts after record 5: 6-8, the oldest at 5 s.
    assert [(p.batch_id, p.records, p.age_ms) for p in points] == [
        (0, 3, 3000.0),
        (1, 5, 13000.0),
        (2, 3, 22000.0),
    ]


def test_source_lag_from_latest_an_unlisted_shard_and_a_gap() -> None:
    other = "shardId-000000000001"
    arrivals = {SHARD: [("1", ms(1)), ("2", ms(2))], other: [("9", ms(3))]}
    # The query started at LATEST pinned at 2 s; shard 1 was not listed yet.
    first = Batch(0, T0 + timedelta(seconds=5), True, {SHARD: ShardState(ts=ms(2) / 1000)})
    second = Batch(
        1, T0 + timedelta(seconds=6), True, {SHARD: ShardState(after="2"), other: ShardState()}
    )
    after_a_gap = Batch(3, T0 + timedelta(seconds=9), True, {SHARD: ShardState(after="2")})
    lag = lag_from_checkpoint([first, second, after_a_gap], arrivals)
    # record 1 (before LATEST) is never read; record 2 and shard 1's record 9 wait for
    # both batches (batch 0 read nothing); batch 3's start (batch 2) is not in the list
    assert [(p.batch_id, p.records, p.age_ms) for p in lag] == [(0, 2, 3000.0), (1, 2, 4000.0)]


def test_the_published_source_lag_wins_and_its_absence_is_explained() -> None:
    raw = dump()
    raw["instances"][0]["metrics"][contract.SOURCE_LAG_MS] = [
        {"at": T0.isoformat(), "count": 1, "sum": 420.0, "max": 420.0}
    ]
    assert source_lag(dump_from_json(raw).runs[0]).age.y == (420.0,)

    bare = dump()
    del bare["instances"][0]["arrivals"]
    lag = source_lag(dump_from_json(bare).runs[0])
    assert lag.origin == "none"
    assert "arrivals" in lag.note


def test_a_checkpoint_that_does_not_match_the_stream_is_reported_not_drawn() -> None:
    raw = dump()
    raw["instances"][0]["batches"][1]["shards"][SHARD]["after"] = "77"
    lag = source_lag(dump_from_json(raw).runs[0])
    assert lag.origin == "none"
    assert "batch 2" in lag.note and "after=77" in lag.note  # batch 2 starts there


def test_the_dump_round_trips_through_json() -> None:
    parsed = dump_from_json(dump("a-r", "b-r"))
    again = dump_from_json(json.loads(json.dumps(dump_to_json(parsed))))
    assert again == parsed
    assert again.instances() == ["a-r", "b-r"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="other"), ": format: expected 'streaming-run-metrics'"),
        (lambda d: d.update(version=2), ": version: expected 1"),
        (lambda d: d.update(instances=[]), ": instances: empty"),
        (lambda d: d["instances"][0].pop("window"), "instances[0].window: missing"),
        (
            lambda d: d["instances"][0]["metrics"][contract.BATCH_DURATION_MS][2].update(max="x"),
            f"instances[0].metrics.{contract.BATCH_DURATION_MS}[2].max: expected a finite number",
        ),
        (
            lambda d: d["instances"][0]["metrics"].update(BatchDurationMS=[]),
            "instances[0].metrics.BatchDurationMS: unknown metric",
        ),
        (
            lambda d: d["instances"][0]["window"].update(start="2026-01-05T10:00:00"),
            "instances[0].window.start: '2026-01-05T10:00:00' has no UTC offset",
        ),
        (
            lambda d: d["instances"][0]["arrivals"][SHARD].append([3, 1.0]),
            f"instances[0].arrivals.{SHARD}[8]: expected [sequence number (string)",
        ),
        (lambda d: d["instances"].append(d["instances"][0]), "listed more than once"),
    ],
)
def test_a_bad_dump_names_the_field(mutate: object, message: str) -> None:
    raw = copy.deepcopy(dump())
    mutate(raw)  # type: ignore[operator]
    with pytest.raises(DumpError) as caught:
        dump_from_json(raw, "metrics dump x.json")
    assert message in str(caught.value)
    assert str(caught.value).startswith("metrics dump x.json")


def test_offsets_file_gives_the_planned_time_and_the_shard_states() -> None:
    text = (
        "v1\n"
        f'{{"batchWatermarkMs":0,"batchTimestampMs":{ms(12):.0f},"conf":{{}}}}\n'
        f'{{"shards": {{"{SHARD}": {{"after": "5", "ts": null, "done": false}}}}}}\n'
    )
    planned, shards = parse_offsets_file(text, "offsets/1")
    assert planned == T0 + timedelta(seconds=12)
    assert shards is not None and shards[SHARD].after == "5"

    connector = text.rsplit("\n", 2)[0] + '\n{"metadata": {"streamName": "s"}}\n'
    assert parse_offsets_file(connector, "offsets/1")[1] is None
    with pytest.raises(DumpError, match="offsets/3: expected a version line"):
        parse_offsets_file("v1\n", "offsets/3")


def test_without_the_topic_failures_are_the_metric_total() -> None:
    raw = {"format": "streaming-run-metrics", "version": 1, "instances": [instance("x")]}
    del raw["instances"][0]["failures_by_reason"]
    fig = figures(dump_from_json(raw).runs[0])
    assert fig.failures_by_reason == {"all reasons (FailureRecords metric)": 50}
