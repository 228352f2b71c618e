"""infra/shared_config.py: the ``streaming.shared`` entries (one region's
shared VPC and MSK cluster) and which instances share them; the shared stack
they build: tests/infra/stacks/test_shared_stack.py."""

from __future__ import annotations

from typing import Any

import pytest

from infra.config import InstanceConfigError, load_instances
from infra.shared_config import check_shared_users, load_shared, sharing, uses_shared
from tests.infra.stacks.test_shared_stack import CLUSTER, NETWORK, REGION, SHARED


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


def _own_tls(domain: str) -> dict[str, Any]:
    return {"tls_certificates_s3_uri": f"s3://b-1/tls/{domain}-{REGION}/c.zip"}


SHARES = {"network": {"shared": True}, "kafka": {"shared": True}}


def test_sharing_is_by_the_flag_in_the_instances_region() -> None:
    (shared,) = load_shared({"streaming": {"shared": [{"region": REGION}]}})
    other = CLUSTER.replace("streaming-failures-us-east-1", "someone-elses")
    instances = load_instances(
        {
            "streaming": {
                "instances": [
                    {"domain": "refunds", "region": REGION, "emr": _own_tls("refunds"), **SHARES},
                    {
                        "domain": "invoices",
                        "region": REGION,
                        "emr": _own_tls("invoices"),
                        "kafka": {"cluster_arn": other},
                    },
                    {"domain": "orders", "region": REGION, "emr": _own_tls("orders")},
                ],
            }
        }
    )
    assert [sharing(i, shared) for i in instances] == [True, False, False]
    assert [uses_shared(i) for i in instances] == [True, False, False]
    assert [(i.creates_vpc, i.creates_cluster) for i in instances] == [
        (False, False),
        (True, False),
        (True, True),
    ]


def _instance_error(**entry: Any) -> str:
    context = {
        "streaming": {
            "instances": [
                {"domain": "refunds", "region": REGION, "emr": _own_tls("refunds"), **entry}
            ]
        }
    }
    with pytest.raises(InstanceConfigError) as caught:
        load_instances(context)
    return str(caught.value)


def test_a_copied_literal_of_the_shared_clusters_arn_is_refused() -> None:
    """The ids come from the shared stack, never from a copy."""
    message = _instance_error(kafka={"cluster_arn": CLUSTER})
    assert message.startswith(
        "instance instances[0] (refunds/us-east-1): field kafka.cluster_arn: bad value "
    )
    assert "allowed: kafka.shared and network.shared true" in message


def test_the_shared_cluster_without_the_shared_vpc_is_refused_naming_the_instance() -> None:
    """The brokers admit the shared VPC's CIDR only: a job in another VPC
    would fail its first failure write."""
    message = _instance_error(kafka={"shared": True})
    assert message == (
        "instance instances[0] (refunds/us-east-1): field kafka.shared: bad value True; "
        "allowed: false unless network.shared is true too: the shared cluster's brokers "
        "admit only the shared VPC's CIDR"
    )
    with_vpc = _instance_error(kafka={"shared": True}, network=NETWORK)
    assert "field kafka.shared: bad value True" in with_vpc
    # The shared VPC with a cluster of its own is allowed.
    (config,) = load_instances(
        {
            "streaming": {
                "instances": [
                    {
                        "domain": "refunds",
                        "region": REGION,
                        "emr": _own_tls("refunds"),
                        "network": {"shared": True},
                    }
                ]
            }
        }
    )
    assert (config.creates_vpc, config.creates_cluster) == (False, True)


def test_shared_flags_with_literal_ids_are_refused() -> None:
    message = _instance_error(network={"shared": True, "vpc_id": "vpc-0123456789abcdef0"})
    assert "field network.vpc_id: bad value 'vpc-0123456789abcdef0'; allowed: null or empty" in (
        message
    )
    message = _instance_error(
        network={"shared": True}, kafka={"shared": True, "cluster_arn": CLUSTER}
    )
    assert "field kafka.cluster_arn" in message
    entry = {"region": REGION, "network": {"shared": True}}
    with pytest.raises(InstanceConfigError, match=r"field network\.shared: bad value True"):
        load_shared({"streaming": {"shared": [entry]}})


def test_an_instance_on_a_shared_stack_no_entry_declares_is_refused() -> None:
    instances = load_instances(
        {
            "streaming": {
                "instances": [
                    {"domain": "refunds", "region": REGION, "emr": _own_tls("refunds"), **SHARES},
                    {"domain": "orders", "region": REGION, "emr": _own_tls("orders")},
                ]
            }
        }
    )
    with pytest.raises(InstanceConfigError) as caught:
        check_shared_users(instances, [])
    (line,) = str(caught.value).splitlines()
    assert line.startswith("instance refunds-us-east-1: field network.shared: bad value True")
    assert '{"region": "us-east-1"} under streaming.shared' in line
    check_shared_users(instances, load_shared({"streaming": {"shared": [{"region": REGION}]}}))


def test_a_broker_count_that_does_not_fill_the_client_subnets_is_refused() -> None:
    """The same check as an instance's created cluster (config_sections.check_broker_count)."""
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


def test_an_instance_in_another_account_than_its_shared_stack_is_refused() -> None:
    """Between accounts (an account on one side only counts) CDK writes weak
    references, which let the shared stack replace what the instance uses."""
    account = "123456789012"
    instances = load_instances(
        {
            "streaming": {
                "instances": [
                    {
                        "domain": "refunds",
                        "region": REGION,
                        "account": account,
                        "emr": _own_tls("refunds"),
                        **SHARES,
                    },
                ]
            }
        }
    )
    with pytest.raises(InstanceConfigError) as caught:
        check_shared_users(instances, load_shared({"streaming": {"shared": [{"region": REGION}]}}))
    (line,) = str(caught.value).splitlines()
    assert line.startswith(
        "instance refunds-us-east-1: field account: '123456789012' but shared us-east-1 has None"
    )
    same = {"streaming": {"shared": [{"region": REGION, "account": account}]}}
    check_shared_users(instances, load_shared(same))
