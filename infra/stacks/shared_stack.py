"""One region's shared stack, ``Streaming-shared-<region>``
(infra/shared_config.py): a VPC with one NAT, and one MSK cluster the
region's instances put their failure topics on.

It owns no topic and grants nothing: each instance creates its own topic on
the cluster (``kafka.cluster_arn``) and grants its own job role that topic
only (FailureTopic.grant_job: ``Connect`` on the cluster, ``WriteData`` and
``DescribeTopic`` on its topic ARN; no cluster-wide admin), so IAM, not the
network, keeps instance A off instance B's topic (tests/infra/stacks/test_shared_stack.py).
The brokers admit the VPC's own CIDR on the IAM/TLS listener: the instances
that use this VPC (``network.shared``) run their EMR nodes in it, and an
instance on the cluster (``kafka.shared``) must use it (infra.config). Those
instances reference :attr:`shared_vpc` and :attr:`shared_cluster_arn`, and
they depend on this stack. The outputs below are for operators
(``make reprocess --msk-cluster-arn``).

Kept exports: the stack exports every id an instance can import
(:attr:`SharedRegionStack.lent`) whatever instances this synth builds. CDK
would otherwise write only the exports of the instances in this synth, so
removing a Region's last instance from ``cdk.json``, switching one off
``network.shared`` / ``kafka.shared``, or deploying a subset
(``-c streaming:instances=...``) would drop an export that a deployed stack
still imports, and CloudFormation refuses that update ("you can't delete the
stack that is exporting the output value or modify the exported output
value", https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/intrinsic-function-reference-importvalue.html).
``Stack.export_value`` without a name gives an export the very name CDK gives
the automatic reference
(https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.Stack.html#exportwbrvalueexportedvalue-options),
so stacks deployed before keep their imports. Why not SSM parameters or weak
references (``Fn::GetStackOutput``): both let the shared stack replace a VPC
or a cluster under a running instance; an export still makes CloudFormation
refuse that, loudly, naming the importing stack
(scripts/change_check.py replays both rules before a deploy).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Fn, RemovalPolicy, Stack, Tags
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from infra.constructs.failure_topic import IAM_TLS_PORT, FailureCluster, add_failure_cluster
from infra.constructs.network import Network, NetworkProps
from infra.shared_config import SharedRegionConfig

SHARED_TAG = "streaming:shared"


class SharedRegionStack(Stack):
    """Exposes ``config``, ``network`` and ``cluster`` (the MSK ``CfnCluster``)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: SharedRegionConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            stack_name=config.stack_name,
            description=f"Shared network and failure-topic cluster of {config.region}",
            **kwargs,
        )
        self.config = config
        Tags.of(self).add(SHARED_TAG, config.region)
        removal = (
            RemovalPolicy.DESTROY if config.removal_policy == "DESTROY" else (RemovalPolicy.RETAIN)
        )
        self.network = network = Network(
            self,
            "Network",
            props=NetworkProps(config.network, removal, config.retention),
        )
        failures = Construct(self, "Failures")
        cluster = FailureCluster(
            config.cluster_name,
            config.kafka,
            network.vpc,
            network.msk_subnets,
            removal,
            config.retention.broker_log_days,
        )
        security_group, _logs, self.cluster = add_failure_cluster(failures, cluster)
        security_group.add_ingress_rule(
            ec2.Peer.ipv4(config.network.vpc_cidr),  # the created VPC's (a literal for cdk-nag)
            ec2.Port.tcp(IAM_TLS_PORT),
            "Kafka clients in the shared VPC (IAM auth over TLS; IAM scopes each to its topic)",
        )
        subnets = network.private_subnets
        CfnOutput(self, "VpcId", value=network.vpc.vpc_id)
        CfnOutput(self, "PrivateSubnetIds", value=Fn.join(",", [s.subnet_id for s in subnets]))
        CfnOutput(
            self, "AvailabilityZones", value=Fn.join(",", [s.availability_zone for s in subnets])
        )
        CfnOutput(self, "MskClusterArn", value=self.cluster.attr_arn)
        for value in self.lent:
            self.export_value(value)

    @property
    def lent(self) -> tuple[str, ...]:
        """Every id an instance of the Region may import: the VPC, its private
        subnets (EMR runs in the first, a created MSK cluster spans the first 2
        or 3) and the cluster's ARN."""
        subnets = tuple(subnet.subnet_id for subnet in self.network.private_subnets)
        return (self.network.vpc.vpc_id, *subnets, self.cluster.attr_arn)

    @property
    def shared_vpc(self) -> ec2.IVpc:
        """The VPC the instances with ``network.shared`` run in (referenced: exported)."""
        return self.network.vpc

    @property
    def shared_cluster_arn(self) -> str:
        """The cluster the instances with ``kafka.shared`` put their topic on."""
        return self.cluster.attr_arn
