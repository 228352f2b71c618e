"""The status report's undeclared-key lines, from CloudWatch's answers. Pure."""

from __future__ import annotations

from datetime import UTC, datetime

from model import contract
from scripts.status.undeclared import KeyCount, key_counts, key_queries, undeclared_lines

AT = datetime(2026, 1, 2, 10, 4, 5, tzinfo=UTC)
LATER = datetime(2026, 1, 2, 10, 9, 0, tzinfo=UTC)


def test_each_key_is_summed_with_its_share_of_input_and_first_sighting() -> None:
    keys = ["channel", "tier", "gone"]
    results = [
        {"Id": "input", "Timestamps": [AT, LATER], "Values": [600.0, 400.0]},
        {"Id": "k0", "Timestamps": [LATER, AT], "Values": [80.0, 40.0]},
        {"Id": "k1", "Timestamps": [LATER], "Values": [3.0]},
        {"Id": "k2", "Timestamps": [], "Values": []},
    ]
    found = key_counts(keys, results)
    assert [(k.key, k.records, k.share, k.first_seen) for k in found] == [
        ("channel", 120, 0.12, AT),
        ("tier", 3, 0.003, LATER),
    ]
    lines = undeclared_lines(found, 60)
    assert "field 'channel' arrived in 120 events (12.0% of input records, since " in lines[1]
    assert "2026-01-02 10:04:05" in lines[1]
    assert "job.event_fields" in lines[-1]


def test_no_key_says_so() -> None:
    assert key_counts(["x"], [{"Id": "k0", "Timestamps": [AT], "Values": [0.0]}]) == []
    assert "none" in undeclared_lines([], 60)[1]


def test_queries_read_each_key_and_the_input_rows_of_the_instance() -> None:
    queries = key_queries("orders-eu-west-1", ["channel"], 60)
    assert [q["Id"] for q in queries] == ["input", "k0"]
    metric = queries[1]["MetricStat"]["Metric"]
    assert metric["MetricName"] == contract.UNDECLARED_KEY_RECORDS
    assert metric["Dimensions"][-1] == {"Name": contract.KEY_DIMENSION, "Value": "channel"}


def test_the_other_keys_series_reads_as_what_it_is() -> None:
    found = [
        KeyCount("channel", 50, 0.05, datetime(2026, 1, 1, tzinfo=UTC)),
        KeyCount(contract.OTHER_KEYS, 900, 0.9, None),
    ]
    lines = undeclared_lines(found, 60)
    assert "  field 'channel' arrived in 50 events" in "\n".join(lines)
    [other] = [line for line in lines if contract.OTHER_KEYS in line or "other keys" in line]
    assert other.startswith("  other keys (past the first 20 the instance named) arrived in 900")
