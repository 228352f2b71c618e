"""``python -m bench efo --quick``: the EFO read loop's latency benchmark runs
end to end at a tiny size and measures what it says (counts, not times)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.quick_run import quick_result


@pytest.mark.emulators  # its own moto server and SubscribeToShard endpoint
@pytest.mark.timeout(300)
def test_quick_efo_bench_receives_every_record_through_subscriptions(tmp_path: Path) -> None:
    result, stdout = quick_result("efo", tmp_path / "results", timeout=280)
    (window,) = result["windows"]
    assert window["put"] == 1_000
    for loop in ("efo", "getrecords"):
        assert window[loop]["received"] == window["put"], loop
        assert 0 < window[loop]["p50_sec"] <= window[loop]["p99_sec"], loop
    # One subscription per shard, continued batch after batch.
    assert result["subscriptions_served"] == result["shards"] == 2
    assert result["efo_batches"] > 2
    assert "put -> received p99, bare EFO loop" in stdout
