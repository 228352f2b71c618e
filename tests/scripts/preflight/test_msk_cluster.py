"""scripts.preflight.msk_cluster: an imported MSK cluster's type, state, version and auth."""

from __future__ import annotations

from typing import Any

import pytest

from scripts.preflight import msk_cluster
from tests.scripts.preflight.stubs import MSK_ARN, Stub, _config, _msk


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        (_msk(), None),
        (_msk(CurrentBrokerSoftwareInfo={"KafkaVersion": "3.5.1"}), "Kafka 3.5.1 (needs >= 3.6)"),
        (
            _msk(ClientAuthentication={"Sasl": {"Scram": {"Enabled": True}}}),
            "IAM client authentication off",
        ),
        (_msk(NumberOfBrokerNodes=2), "2 brokers < kafka.topic_replication_factor 3"),
        ({"ClusterInfo": {"ClusterType": "SERVERLESS", "State": "ACTIVE"}}, "type SERVERLESS"),
    ],
)
def test_imported_msk_cluster(response: dict[str, Any], problem: str | None) -> None:
    config = _config(kafka={"cluster_arn": MSK_ARN})
    result = msk_cluster.check_msk_cluster(config, {"kafka": Stub(describe_cluster_v2=response)})
    assert result.ok is (problem is None)
    if problem:
        assert problem in result.detail and "IAM client auth" in result.fix


def test_the_shared_cluster_is_read_from_the_deployed_shared_stacks_output() -> None:
    """A shared instance names no ARN; preflight reads the
    shared stack's MskClusterArn output and checks that cluster."""
    config = _config(network={"shared": True}, kafka={"shared": True})
    outputs = {"Stacks": [{"Outputs": [{"OutputKey": "MskClusterArn", "OutputValue": MSK_ARN}]}]}
    cloudformation = Stub(describe_stacks=outputs)
    kafka = Stub(describe_cluster_v2=_msk(NumberOfBrokerNodes=2))
    result = msk_cluster.check_msk_cluster(
        config, {"kafka": kafka, "cloudformation": cloudformation}
    )
    assert cloudformation.calls == [
        ("describe_stacks", {"StackName": "Streaming-shared-eu-west-1"})
    ]
    assert kafka.calls == [("describe_cluster_v2", {"ClusterArn": MSK_ARN})]
    assert not result.ok and "2 brokers" in result.detail


def test_a_shared_cluster_not_deployed_yet_passes_saying_so() -> None:
    config = _config(network={"shared": True}, kafka={"shared": True})
    missing = Stub(describe_stacks=RuntimeError("Stack with id x does not exist"))
    result = msk_cluster.check_msk_cluster(config, {"cloudformation": missing})
    assert result.status == "PASS"
    assert result.detail == (
        "the shared cluster of Streaming-shared-eu-west-1, not deployed yet "
        "(cdk deploy deploys it before the instance)"
    )
