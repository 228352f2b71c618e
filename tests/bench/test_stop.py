"""bench/stop.py's bound, held in CI: a graceful stop of the job under
1,000 records/s on a 1 s trigger, within one trigger plus the slowest batch
of the same run (one stop, to keep CI short; the full benchmark takes ten at
random moments: ``python -m bench stop``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import stop
from local.emulators import Endpoints

pytestmark = pytest.mark.timeout(1200)


def test_a_stop_under_load_ends_within_a_trigger_plus_the_slowest_batch(
    spark: Any, endpoints: Endpoints, tmp_path: Path
) -> None:
    config = stop.stop_config(tmp_path, endpoints.aws_url, endpoints.kafka_bootstrap)
    found = stop.measure_stops(spark, config, endpoints.aws_url, stops=1)
    assert len(found.seconds) == 1 and found.batches >= stop.WARM_BATCHES
    assert found.within, (
        f"the stop took {found.seconds[0]:.2f} s; bound {found.bound_sec:.2f} s "
        f"(trigger {found.trigger_sec} s + slowest batch {found.slowest_batch_sec:.2f} s)"
    )


def test_the_bound_is_a_trigger_plus_the_slowest_batch() -> None:
    found = stop.Stops(seconds=(0.8, 2.9), slowest_batch_sec=2.0, batches=9, trigger_sec=1.0)
    assert found.bound_sec == 3.0 and found.within
    assert not stop.Stops((3.2,), 2.0, 9, 1.0).within
