"""The MSK cluster an instance puts its failure topic on, as the checks that
read the cluster need its ARN: ``kafka.cluster_arn``, or, for an instance on
its Region's shared cluster (``kafka.shared``), the ``MskClusterArn`` output
of the deployed ``Streaming-shared-<region>`` stack (``DescribeStacks``).
None: the stack creates its own cluster, or the shared stack is not deployed
yet (``cdk deploy`` deploys it first: infra/stacks/application.py)."""

from __future__ import annotations

from infra.config import InstanceConfig
from model.contract import STACK_PREFIX
from scripts.preflight.result import Clients

SHARED_CLUSTER_OUTPUT = "MskClusterArn"


def shared_stack_name(config: InstanceConfig) -> str:
    return f"{STACK_PREFIX}-shared-{config.region}"


def failure_cluster_arn(config: InstanceConfig, clients: Clients) -> str | None:
    """The cluster's ARN, when there is one to read (see the module)."""
    if config.kafka.cluster_arn is not None or not config.kafka.shared:
        return config.kafka.cluster_arn
    try:
        stacks = clients["cloudformation"].describe_stacks(StackName=shared_stack_name(config))
    except Exception:
        return None
    for stack in stacks.get("Stacks", []):
        for output in stack.get("Outputs", []):
            if output.get("OutputKey") == SHARED_CLUSTER_OUTPUT:
                return str(output["OutputValue"])
    return None
