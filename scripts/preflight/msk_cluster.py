"""An imported MSK cluster: provisioned, ACTIVE, Kafka >= 3.6, IAM client auth,
enough brokers for the topic's replication factor (``DescribeClusterV2``)."""

from __future__ import annotations

from infra.config import InstanceConfig
from infra.config_fields import MIN_KAFKA_VERSION
from scripts.preflight.result import Clients, Result, error_text, iam_fix
from scripts.preflight.shared_cluster import failure_cluster_arn, shared_stack_name


def check_msk_cluster(config: InstanceConfig, clients: Clients) -> Result:
    name = "imported MSK cluster"
    arn = failure_cluster_arn(config, clients)
    if arn is None and config.kafka.shared:
        return Result(
            name,
            True,
            f"the shared cluster of {shared_stack_name(config)}, not deployed yet "
            "(cdk deploy deploys it before the instance)",
        )
    if arn is None:
        return Result(name, True, "the stack creates its own cluster")
    try:
        info = clients["kafka"].describe_cluster_v2(ClusterArn=arn)["ClusterInfo"]
    except Exception as exc:
        return Result(
            name,
            False,
            f"DescribeClusterV2 failed: {error_text(exc)}",
            iam_fix("kafka:DescribeClusterV2"),
        )
    provisioned = info.get("Provisioned")
    problems = []
    if info.get("ClusterType") != "PROVISIONED" or provisioned is None:
        problems.append(f"type {info.get('ClusterType')} (AWS::MSK::Topic needs PROVISIONED)")
    if info.get("State") != "ACTIVE":
        problems.append(f"state {info.get('State')}")
    if provisioned is not None:
        version = provisioned.get("CurrentBrokerSoftwareInfo", {}).get("KafkaVersion", "")
        parts = version.split(".")
        if (
            len(parts) < 2
            or not all(p.isdigit() for p in parts[:2])
            or (
                int(parts[0]),
                int(parts[1]),
            )
            < MIN_KAFKA_VERSION
        ):
            problems.append(f"Kafka {version or 'unknown'} (needs >= 3.6)")
        sasl = provisioned.get("ClientAuthentication", {}).get("Sasl", {})
        if not sasl.get("Iam", {}).get("Enabled"):
            problems.append("IAM client authentication off")
        brokers = provisioned.get("NumberOfBrokerNodes", 0)
        if brokers and brokers < config.kafka.topic_replication_factor:
            problems.append(
                f"{brokers} brokers < kafka.topic_replication_factor "
                f"{config.kafka.topic_replication_factor}"
            )
    if problems:
        return Result(
            name,
            False,
            f"{arn}: " + "; ".join(problems),
            "use an ACTIVE provisioned cluster on Kafka >= 3.6 with IAM client auth, or "
            "leave kafka.cluster_arn null to create one",
        )
    return Result(name, True, f"{arn} is provisioned, ACTIVE, Kafka >= 3.6, IAM auth")
