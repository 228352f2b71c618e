"""infra/shared_config.py: the ``streaming.shared`` entries (one region's
shared VPC and MSK cluster) and which instances share them; the shared stack
they build: tests/infra/stacks/test_shared_stack.py."""

from __future__ import annotations

import pytest

from infra.config import InstanceConfigError, load_instances
from infra.shared_config import load_shared, sharing
from tests.infra.stacks.test_shared_stack import CLUSTER, REGION, SHARED


def test_a_shared_entry_that_imports_instead_of_creating_is_refused() -> None:
    context = {"streaming": {"shared": [{"region": REGION, "kafka": {"cluster_arn": CLUSTER}}]}}
    with pytest.raises(InstanceConfigError, match=r"shared\[0\] \(us-east-1\): field kafka"):
        load_shared(context)
    twice = {"streaming": {"shared": [{"region": REGION}, {"region": REGION}]}}
    with pytest.raises(InstanceConfigError, match="duplicate value 'us-east-1'"):
        load_shared(twice)
    assert [c.stack_name for c in load_shared({"streaming": {"shared": [{"region": REGION}]}})] == [
        SHARED
    ]


def test_sharing_is_by_the_shared_clusters_name_in_the_instances_region() -> None:
    (shared,) = load_shared({"streaming": {"shared": [{"region": REGION}]}})
    tls = {"emr": {"tls_certificates_s3_uri": "s3://b-1/tls/c.zip"}}
    other = CLUSTER.replace("streaming-failures-us-east-1", "someone-elses")
    instances = load_instances(
        {
            "streaming": {
                "defaults": tls,
                "instances": [
                    {"domain": "refunds", "region": REGION, "kafka": {"cluster_arn": CLUSTER}},
                    {"domain": "invoices", "region": REGION, "kafka": {"cluster_arn": other}},
                    {"domain": "orders", "region": REGION},
                ],
            }
        }
    )
    assert [sharing(i, shared) for i in instances] == [True, False, False]


def test_a_broker_count_that_does_not_fill_the_client_subnets_is_refused() -> None:
    """The same check as an instance's created cluster (infra.config.check_broker_count)."""
    entry = {
        "region": REGION,
        "network": {"availability_zones": ["us-east-1a", "us-east-1b"]},
        "kafka": {"broker_count": 3},
    }
    with pytest.raises(InstanceConfigError) as caught:
        load_shared({"streaming": {"shared": [entry]}})
    assert str(caught.value) == (
        "shared[0] (us-east-1): field kafka.broker_count: bad value 3; "
        "allowed: a multiple of the 2 client subnets the cluster spans"
    )
    entry["kafka"] = {"broker_count": 4}
    (config,) = load_shared({"streaming": {"shared": [entry]}})
    assert config.kafka.broker_count == 4
