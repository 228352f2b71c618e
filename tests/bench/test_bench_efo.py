"""``python -m bench efo --quick``: the EFO read loop's latency benchmark runs
end to end at a tiny size and measures what it says (counts, not times)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.emulators  # its own moto server and SubscribeToShard endpoint
@pytest.mark.timeout(300)
def test_quick_efo_bench_receives_every_record_through_subscriptions(tmp_path: Path) -> None:
    out = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "efo", "--quick", "--out-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    result = json.loads((out / "efo.json").read_text(encoding="utf-8"))
    assert result["benchmark"] == "efo" and result["mode"] == "quick"
    (window,) = result["windows"]
    assert window["put"] == 1_000
    for loop in ("efo", "getrecords"):
        assert window[loop]["received"] == window["put"], loop
        assert 0 < window[loop]["p50_sec"] <= window[loop]["p99_sec"], loop
    # One subscription per shard, continued batch after batch.
    assert result["subscriptions_served"] == result["shards"] == 2
    assert result["efo_batches"] > 2
    assert (out / "efo.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert "EFO bare loop put->received p99" in done.stdout
