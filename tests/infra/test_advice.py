"""The advice (infra/advice.py): the shipped example's declared loads worked
by hand from docs/sizing.md's formula and the Kinesis limits, the verdicts,
and the one line synth prints or the one line it refuses with."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from infra.advice import (
    Demand,
    Shape,
    advice_line,
    advised,
    demand_of,
    need,
    shape_of,
    shortest_trigger,
    verdict,
)
from infra.config import InstanceConfigError, load_instances, read_cdk_context
from infra.cost.prices import PRICE_ROWS
from tests.infra.config_cases import context_of, instance_entry

ROOT = Path(__file__).resolve().parents[2]


def _example() -> dict[str, Any]:
    return dict(read_cdk_context(ROOT / "cdk.json"))


def _declared() -> dict[str, Any]:
    return {c.instance_id: c for c in load_instances(_example())}


def _usd(key: str, region: str) -> float:
    (found,) = [r.usd for r in PRICE_ROWS if r.key == key and r.region == region]
    return found


def test_each_declared_load_of_the_example_gets_the_formulas_need() -> None:
    """c >= h x r x I / (p x (I - F)), shards >= max(h r / 1,000, h r b / 1 MiB),
    state = r x 2 x H x 3600 x 91 B; F, p per target (docs/sizing.md)."""
    for config in _declared().values():
        demand = demand_of(config)
        if demand is None:  # no expected_load declared: nothing to advise
            continue
        load, job = config.expected_load, config.job
        h, r, b = load.headroom, load.records_per_sec, load.record_bytes
        interval = job.trigger_interval_sec
        fixed, p = (6.0, 6_500.0) if config.compute == "emr" else (3.0, 2_200.0)
        # At or below F batches run back to back: then what keeps up.
        by_hand = h * r * interval / (p * (interval - fixed)) if interval > fixed else h * r / p
        found = need(demand)
        assert found.cores == pytest.approx(by_hand), config.instance_id
        assert found.shards == max(1, math.ceil(h * r / 1000), math.ceil(h * r * b / 2**20))
        assert found.state_gb == pytest.approx(r * 2 * job.dedup_horizon_hours * 3600 * 91 / 1e9)


def test_the_heavy_example_needs_under_one_core_at_a_thousand_records_a_second() -> None:
    """The worked example of docs/sizing.md: 2 x 1,000 x 10 / (6,500 x 4) = 0.77."""
    found = need(Demand("emr", 1000, 133, 2.0, 10, 24))
    assert found.cores == pytest.approx(2 * 1000 * 10 / (6500 * 4))
    assert found.shards == 2
    assert found.broker == "kafka.t3.small"


def test_the_advised_shapes_are_graviton_and_priced_on_both_targets() -> None:
    demand = Demand("emr", 1000, 133, 2.0, 10, 24)
    shapes = advised(demand, "eu-west-1")
    assert shapes["emr"].text.startswith("emr 1 x m7g.xlarge core")
    # One m7g.xlarge core and one primary: EC2 + EMR fee + 79 GiB of gp2 each.
    node = 730 * (_usd("ec2:m7g.xlarge", "eu-west-1") + _usd("emr:m7g.xlarge", "eu-west-1"))
    ebs = 79 * _usd("ebs:gp2", "eu-west-1")
    assert shapes["emr"].monthly_usd == pytest.approx(2 * (node + ebs))
    # Serverless: p = 2,200 a core, F = 3 s: 2,000 x 10 / (2,200 x 7) = 1.3 -> 2 executors.
    assert "2 x 1 vCPU / 2 GB" in shapes["serverless"].text
    vcpu, gb = (
        _usd("emr-serverless:vcpu-arm", "eu-west-1"),
        _usd("emr-serverless:gb-arm", "eu-west-1"),
    )
    # A 1 vCPU / 2 GB driver and two 1 vCPU / 2 GB executors: 3 vCPU, 6 GB.
    assert shapes["serverless"].monthly_usd == pytest.approx(730 * (3 * vcpu + 6 * gb))
    assert advised(demand, "us-west-2")["emr"].monthly_usd is None, "no rows: not priced"


def test_the_shortest_trigger_solves_the_batch_equation() -> None:
    demand = Demand("emr", 1000, 133, 2.0, 10, 24)
    interval = shortest_trigger(demand, 2)
    assert interval is not None
    assert 6.0 + 2000 * interval / (2 * 6500) == pytest.approx(interval)
    assert shortest_trigger(Demand("emr", 10_000, 133, 2.0, 10, 24), 2) is None


def test_verdicts_over_at_more_than_four_times_and_under_below_the_need() -> None:
    demand = Demand("serverless", 10, 1024, 2.0, 30, 24)
    assert verdict(demand, Shape("serverless", 1, 1, 20), "eu-west-1") is None
    assert verdict(demand, Shape("serverless", 1, 4, 20), "eu-west-1") is None
    over = verdict(demand, Shape("serverless", 5, 1, 20), "eu-west-1")
    assert over is not None and over.kind == "over" and "5x" in over.what
    hot = Demand("serverless", 5000, 300, 2.0, 30, 24)
    under = verdict(hot, Shape("serverless", 1, 1, 20), "eu-west-1")
    assert under is not None and under.kind == "under"
    assert "1 shard(s) < 10 needed" in under.what and "executor disk" in under.what


def _light(**changes: Any) -> dict[str, Any]:
    """One light serverless instance (orders/eu-west-1, one shard, 10 records/s)
    with ``changes``: a context of its own, whatever cdk.json declares."""
    entry: dict[str, Any] = {
        "size": "small",
        "compute": "serverless",
        "stream": {"shard_count": 1},
        "expected_load": {"records_per_sec": 10},
    }
    return context_of(instance_entry(**{**entry, **changes}))


def test_an_undersized_instance_is_refused_in_one_line_with_the_advised_shape() -> None:
    context = _light(expected_load={"records_per_sec": 5000, "record_bytes": 300})
    with pytest.raises(InstanceConfigError) as raised:
        load_instances(context)
    (line,) = str(raised.value).splitlines()
    assert line.startswith(
        "instance instances[0] (orders/eu-west-1): field expected_load.records_per_sec: "
        "bad value 5000.0; allowed: a shape that holds it x2 headroom (1 executor cores < "
    )
    assert "1 shard(s) < 10 needed" in line and "advised" not in line
    assert "serverless ARM64 6 x 1 vCPU" in line and "10 provisioned shard(s)" in line


def test_an_accepted_undersize_is_a_warning_and_needs_a_reason() -> None:
    load = {"records_per_sec": 5000, "record_bytes": 300, "accept_undersized": True}
    with pytest.raises(InstanceConfigError, match=r"field expected_load\.reason"):
        load_instances(_light(expected_load=load))
    load["reason"] = "a one-hour load test"
    config = load_instances(_light(expected_load=load))[0]
    line = advice_line(config)
    assert line is not None and line.startswith(
        "advice: Streaming-orders-eu-west-1 undersized for 5000 records/s"
    )
    assert "accepted: a one-hour load test; advised: serverless" in line


def test_an_oversized_instance_gets_one_warning_line() -> None:
    config = load_instances(_light(serverless={"executor_count": 8}))[0]
    line = advice_line(config)
    assert line is not None and "\n" not in line
    assert line.startswith("advice: Streaming-orders-eu-west-1 oversized for 10 records/s")
    assert "8 executor cores = 8x the 1 needed" in line
    assert shape_of(config).cores == 8


def test_no_declared_load_no_advice() -> None:
    config = load_instances(_light(expected_load={}))[0]
    assert demand_of(config) is None and advice_line(config) is None
