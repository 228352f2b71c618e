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
