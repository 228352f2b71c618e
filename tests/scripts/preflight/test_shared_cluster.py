"""The failure topic's cluster as preflight reads it: the configured ARN, the
shared stack's ``MskClusterArn`` output for an instance on the shared cluster,
or None when there is nothing to read (own cluster, shared stack not deployed)."""

from __future__ import annotations

from scripts.preflight.shared_cluster import (
    SHARED_CLUSTER_OUTPUT,
    failure_cluster_arn,
    shared_stack_name,
)
from tests.scripts.preflight.fakes import Answers, client_error, config_of

ARN = "arn:aws:kafka:eu-west-1:123456789012:cluster/shared/abc"
SHARED = {"network": {"shared": True}, "kafka": {"shared": True}}


def _stacks(*outputs: dict[str, str]) -> Answers:
    return Answers(describe_stacks={"Stacks": [{"Outputs": list(outputs)}]})


def test_the_shared_stack_is_named_by_region() -> None:
    assert shared_stack_name(config_of()) == "Streaming-shared-eu-west-1"


def test_an_instance_with_its_own_cluster_asks_nothing() -> None:
    cloudformation = Answers()
    assert failure_cluster_arn(config_of(), {"cloudformation": cloudformation}) is None
    assert cloudformation.calls == []


def test_a_shared_instance_reads_the_shared_stacks_output() -> None:
    cloudformation = _stacks(
        {"OutputKey": "Other", "OutputValue": "x"},
        {"OutputKey": SHARED_CLUSTER_OUTPUT, "OutputValue": ARN},
    )
    assert failure_cluster_arn(config_of(**SHARED), {"cloudformation": cloudformation}) == ARN
    assert cloudformation.calls == [
        ("describe_stacks", {"StackName": "Streaming-shared-eu-west-1"})
    ]


def test_a_shared_stack_not_deployed_or_without_the_output_gives_none() -> None:
    missing = Answers(describe_stacks=client_error("ValidationError", "DescribeStacks"))
    assert failure_cluster_arn(config_of(**SHARED), {"cloudformation": missing}) is None
    assert failure_cluster_arn(config_of(**SHARED), {"cloudformation": _stacks()}) is None
