"""Changes CloudFormation cannot apply to a deployed instance stop synth
(infra/deployed.py, the ``deployed`` section of an instance in cdk.json):
each refusal names the instance, the field and the way through; what one
deploy can apply, and an instance never deployed, pass."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.config import InstanceConfig, InstanceConfigError, load_instances, read_cdk_context
from infra.deployed import (
    UPDATE_SHARD_COUNT_PAGE,
    replication_factor_problem,
    shard_count_problem,
    shard_range,
    shard_steps,
)
from infra.stacks.application import build_app
from tests.fixtures import EXAMPLE_CDK_JSON

NAME = "instances[0] (orders/eu-west-1)"


def _context(**instance: Any) -> dict[str, Any]:
    context = copy.deepcopy(dict(read_cdk_context(EXAMPLE_CDK_JSON)))
    context["streaming"]["instances"] = [{"domain": "orders", "region": "eu-west-1", **instance}]
    return context


def _load(**instance: Any) -> InstanceConfig:
    return load_instances(_context(**instance))[0]


# ------------------------------------------------------------------ the pure rules


@pytest.mark.parametrize(
    ("deployed", "low", "high"), [(1, 1, 2), (2, 1, 4), (3, 2, 6), (4, 2, 8), (5, 3, 10)]
)
def test_one_call_reaches_half_rounded_up_to_double(deployed: int, low: int, high: int) -> None:
    assert shard_range(deployed) == (low, high)


@pytest.mark.parametrize(
    ("deployed", "wanted", "steps"),
    [(4, 16, [8, 16]), (4, 20, [8, 16, 20]), (16, 3, [8, 4, 3]), (3, 1, [2, 1]), (4, 8, [8])],
)
def test_the_steps_between_two_counts(deployed: int, wanted: int, steps: list[int]) -> None:
    assert shard_steps(deployed, wanted) == steps
    previous = deployed
    for step in steps:
        low, high = shard_range(previous)
        assert low <= step <= high
        previous = step


@pytest.mark.parametrize("wanted", [2, 3, 4, 5, 8])
def test_a_count_within_one_call_is_no_problem(wanted: int) -> None:
    assert shard_count_problem(4, wanted) is None


def test_the_same_factor_is_no_problem() -> None:
    assert replication_factor_problem(3, 3, "t") is None


# ------------------------------------------------------------------ through cdk.json


def test_more_than_double_the_deployed_shards_is_refused_with_the_steps() -> None:
    with pytest.raises(InstanceConfigError) as raised:
        _load(stream={"shard_count": 16}, deployed={"shard_count": 4})
    message = str(raised.value)
    assert message.startswith(
        f"instance {NAME}: field stream.shard_count: bad value 16; allowed: 2..8 in one deploy: "
        "the stream is deployed with 4 shards (deployed.shard_count)"
    )
    assert UPDATE_SHARD_COUNT_PAGE in message
    assert "Way through: deploy stream.shard_count 8, then 16, one deploy each" in message
    assert "setting deployed.shard_count to each value" in message


def test_less_than_half_the_deployed_shards_is_refused() -> None:
    with pytest.raises(
        InstanceConfigError,
        match=r"field stream\.shard_count: bad value 1; allowed: 2\.\.8 in one deploy: .*"
        r"Way through: deploy stream\.shard_count 2, then 1,",
    ):
        _load(stream={"shard_count": 1}, deployed={"shard_count": 4})


@pytest.mark.parametrize("wanted", [2, 3, 8])
def test_doubling_or_halving_the_deployed_shards_passes(wanted: int) -> None:
    config = _load(stream={"shard_count": wanted}, deployed={"shard_count": 4})
    assert config.stream.shard_count == wanted
    assert config.deployed.shard_count == 4


def test_a_new_replication_factor_on_a_deployed_topic_is_refused() -> None:
    with pytest.raises(InstanceConfigError) as raised:
        _load(kafka={"topic_replication_factor": 2, "topic_min_insync_replicas": 1},
              deployed={"topic_replication_factor": 3})  # fmt: skip
    message = str(raised.value)
    assert message.startswith(
        f"instance {NAME}: field kafka.topic_replication_factor: bad value 2; allowed: 3 "
        "(deployed.topic_replication_factor): the failure topic "
        "streaming.orders.eu-west-1.failures is deployed with 3 replicas"
    )
    assert "create-before-delete collides with the live topic" in message
    assert "Way through: keep 3, or stop the job, drain the topic (make reprocess)" in message
    assert 'docs/infra.md, "Changes synth refuses"' in message


def test_the_deployed_factor_passes() -> None:
    assert _load(deployed={"topic_replication_factor": 3}).kafka.topic_replication_factor == 3


def test_a_first_deploy_is_never_refused() -> None:
    """No ``deployed`` section: nothing is live, any count and factor pass."""
    config = _load(stream={"shard_count": 64}, kafka={"topic_replication_factor": 2,
                                                      "topic_min_insync_replicas": 1})  # fmt: skip
    assert config.deployed.shard_count is None
    assert config.deployed.topic_replication_factor is None


def test_an_on_demand_stream_has_no_shard_step() -> None:
    """A mode switch is not an UpdateShardCount: the shard rule does not apply."""
    assert _load(deployed={"shard_count": 4}).stream.on_demand


def test_a_bad_deployed_value_names_its_field() -> None:
    with pytest.raises(InstanceConfigError, match=r"field deployed\.shard_count: bad value 0"):
        _load(deployed={"shard_count": 0})
    with pytest.raises(InstanceConfigError, match=r"field deployed\.shard: unknown field"):
        _load(deployed={"shard": 4})


def test_the_app_refuses_before_any_construct() -> None:
    """``cdk synth`` / ``cdk deploy`` run build_app: the refusal stops it."""
    context = _context(stream={"shard_count": 9}, deployed={"shard_count": 4})
    context["streaming:synth-check"] = True
    with pytest.raises(InstanceConfigError, match=r"field stream\.shard_count: bad value 9"):
        build_app(context)
