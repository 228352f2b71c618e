"""Preflight: the region's quotas have room for what the stack creates.

* **EC2 On-Demand vCPUs.** The EMR cluster's instance groups run On-Demand
  (infra/constructs/emr_cluster.py): master and core nodes, vCPUs from the
  instance types the instance declares (infra/sizing.py knows the core types;
  any other type is asked of DescribeInstanceTypes). They count against
  Service Quotas ``L-1216C47A``, "Running On-Demand Standard (A, C, D, H, I,
  M, R, T, Z) instances", a quota in vCPUs whose default can be as low as 5
  (https://docs.aws.amazon.com/cli/latest/userguide/cli_service-quotas_code_examples.html,
  get-aws-default-service-quota; what counts:
  https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html).
  The running instances of those families use part of it. A deploy that
  replaces the cluster runs the new one beside the old one until the old one
  is deleted (docs/deploy.md, "Replacing the cluster"), so room for one
  cluster but not two is a warning.
* **VPCs.** A created VPC (no ``network.vpc_id``) counts against "VPCs per
  Region", ``L-F678F1CE`` (default 5).
* **Elastic IPs.** Each NAT gateway of a created VPC takes an Elastic IP
  (``network.nat_gateways``, infra/constructs/network.py), against "EC2-VPC
  Elastic IPs", ``L-0263D0A3`` (default 5). VPC quotas:
  https://docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html.

A quota is read with GetServiceQuota (the applied value), else
GetAWSDefaultServiceQuota. Taking the last of a VPC or Elastic IP quota is a
warning: the next stack in the region would fail.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from infra.config import InstanceConfig
from infra.sizing import INSTANCE_TYPES
from scripts.preflight.result import Clients, Result, error_code, error_text, iam_fix

ON_DEMAND_STANDARD: Final = ("ec2", "L-1216C47A")
VPCS_PER_REGION: Final = ("vpc", "L-F678F1CE")
ELASTIC_IPS: Final = ("ec2", "L-0263D0A3")
# The instance families L-1216C47A counts (its name lists them).
STANDARD_FAMILIES: Final = frozenset("acdhimrtz")
RUNNING_STATES: Final = ("pending", "running")


class QuotaUnreadableError(Exception):
    """Neither the applied nor the default value of a quota could be read."""


def quota_value(service_quotas: Any, service: str, code: str) -> int:
    """The quota's applied value, else its AWS default."""
    try:
        return int(
            service_quotas.get_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"]
        )
    except Exception as exc:
        if error_code(exc) != "NoSuchResourceException":
            raise QuotaUnreadableError(
                f"GetServiceQuota {service}/{code}: {error_text(exc)}"
            ) from exc
    try:
        found = service_quotas.get_aws_default_service_quota(ServiceCode=service, QuotaCode=code)
    except Exception as exc:
        raise QuotaUnreadableError(
            f"GetAWSDefaultServiceQuota {service}/{code}: {error_text(exc)}"
        ) from exc
    return int(found["Quota"]["Value"])


def quota_or_failure(name: str, clients: Clients, quota_id: tuple[str, str]) -> int | Result:
    """The quota's value, or the check's FAIL naming the permissions to read it."""
    try:
        return quota_value(clients["service-quotas"], *quota_id)
    except QuotaUnreadableError as exc:
        return Result(
            name,
            False,
            str(exc),
            iam_fix("servicequotas:GetServiceQuota, servicequotas:GetAWSDefaultServiceQuota"),
        )


def _quota_fix(service: str, code: str, value: int, region: str) -> str:
    return (
        f"request an increase: aws service-quotas request-service-quota-increase --service-code "
        f"{service} --quota-code {code} --desired-value {value} --region {region}"
    )


def is_standard(instance_type: str) -> bool:
    """Whether ``instance_type`` counts against L-1216C47A (its family letter)."""
    return instance_type[:1] in STANDARD_FAMILIES


def vcpus_of(types: Iterable[str], ec2: Any) -> dict[str, int]:
    """vCPUs per instance type: infra/sizing.py's table, else DescribeInstanceTypes."""
    wanted = sorted(set(types))
    found = {t: INSTANCE_TYPES[t][0] for t in wanted if t in INSTANCE_TYPES}
    unknown = [t for t in wanted if t not in found]
    if unknown:
        response = ec2.describe_instance_types(InstanceTypes=unknown)
        for info in response["InstanceTypes"]:
            found[info["InstanceType"]] = int(info["VCpuInfo"]["DefaultVCpus"])
    return found


@dataclass(frozen=True)
class Group:
    """One EMR instance group: its role, count and type."""

    role: str
    count: int
    instance_type: str


def cluster_groups(config: InstanceConfig) -> tuple[Group, ...]:
    emr = config.emr
    return (
        Group("master", emr.master_instance_count, emr.master_instance_type),
        Group("core", emr.core_instance_count, emr.core_instance_type),
    )


def running_vcpus(ec2: Any) -> int:
    """vCPUs of the region's pending and running instances of the standard families."""
    counts: dict[str, int] = {}
    paginator = ec2.get_paginator("describe_instances")
    pages = paginator.paginate(
        Filters=[{"Name": "instance-state-name", "Values": list(RUNNING_STATES)}]
    )
    for page in pages:
        for reservation in page["Reservations"]:
            for instance in reservation["Instances"]:
                kind = instance["InstanceType"]
                if is_standard(kind) and instance.get("InstanceLifecycle") != "spot":
                    counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        return 0
    per_type = vcpus_of(counts, ec2)
    return sum(per_type[kind] * n for kind, n in counts.items())


def judge_vcpus(
    needed: int, quota: int, used: int, *, how: str, region: str, ignored: str = ""
) -> Result:
    """PASS, WARN or FAIL for ``needed`` vCPUs against ``quota`` with ``used``
    in use; a group outside the standard families (``ignored``) is a WARN. Pure."""
    name = "EC2 vCPU quota"
    free = quota - used
    service, code = ON_DEMAND_STANDARD
    detail = (
        f"the cluster needs {needed} vCPUs ({how}); {free} of the {quota}-vCPU quota "
        f"{code} are free ({used} in use by running On-Demand standard instances)"
    ) + ignored
    increase = _quota_fix(service, code, used + 2 * needed, region)
    if needed > free:
        return Result(
            name, False, detail, f"stop On-Demand instances you do not need, or {increase}"
        )
    if 2 * needed > free:
        return Result(
            name,
            True,
            detail + f"; a deploy that replaces the cluster runs a second one ({2 * needed} "
            "vCPUs in all) until the old one is deleted",
            f"before such a deploy, {increase}",
            warn=True,
        )
    if ignored:
        return Result(name, True, detail, "that quota, in the Service Quotas console", warn=True)
    return Result(name, True, detail)


def check_vcpu_quota(config: InstanceConfig, clients: Clients) -> Result:
    name = "EC2 vCPU quota"
    if config.compute == "serverless":  # its quota: scripts/preflight/serverless.py
        return Result(name, True, f'{config.instance_id} runs on "compute": "serverless": n/a')
    ec2 = clients["ec2"]
    groups = cluster_groups(config)
    standard = [g for g in groups if is_standard(g.instance_type)]
    other = [g for g in groups if not is_standard(g.instance_type)]
    try:
        per_type = vcpus_of((g.instance_type for g in standard), ec2)
    except Exception as exc:
        return Result(
            name,
            False,
            f"DescribeInstanceTypes failed: {error_text(exc)}",
            iam_fix("ec2:DescribeInstanceTypes"),
        )
    needed = sum(per_type[g.instance_type] * g.count for g in standard)
    how = " + ".join(
        f"{g.role} {g.count} x {g.instance_type} ({per_type[g.instance_type]})" for g in standard
    )
    ignored = "".join(
        f"; {g.role} {g.instance_type} is not a standard family and counts against another "
        "quota, not checked here"
        for g in other
    )
    quota = quota_or_failure(name, clients, ON_DEMAND_STANDARD)
    if isinstance(quota, Result):
        return quota
    try:
        used = running_vcpus(ec2)
    except Exception as exc:
        return Result(
            name,
            False,
            f"DescribeInstances failed: {error_text(exc)}",
            iam_fix("ec2:DescribeInstances, ec2:DescribeInstanceTypes"),
        )
    return judge_vcpus(
        needed, quota, used, how=how or "no standard group", region=config.region, ignored=ignored
    )


def judge_count(
    name: str,
    what: str,
    needed: int,
    quota: int,
    used: int,
    *,
    quota_id: tuple[str, str],
    region: str,
) -> Result:
    """PASS, WARN or FAIL for ``needed`` more of ``what``. Pure."""
    service, code = quota_id
    detail = f"the stack creates {needed} more; {used} of {quota} {what} in use ({code})"
    increase = _quota_fix(service, code, used + needed + 1, region)
    if used + needed > quota:
        return Result(name, False, detail, f"release unused {what}, or {increase}")
    if used + needed == quota:
        return Result(
            name,
            True,
            detail + "; it takes the last one: the next stack needing one fails",
            increase,
            warn=True,
        )
    return Result(name, True, detail)


def _count_check(
    config: InstanceConfig,
    clients: Clients,
    *,
    name: str,
    what: str,
    needed: int,
    quota_id: tuple[str, str],
    count: Any,
    permission: str,
) -> Result:
    if needed == 0:
        return Result(
            name, True, f"the stack creates no {what} (network.vpc_id is set, or network.shared)"
        )
    quota = quota_or_failure(name, clients, quota_id)
    if isinstance(quota, Result):
        return quota
    try:
        used = int(count())
    except Exception as exc:
        return Result(
            name, False, f"{permission} failed: {error_text(exc)}", iam_fix(f"ec2:{permission}")
        )
    return judge_count(name, what, needed, quota, used, quota_id=quota_id, region=config.region)


def check_vpc_quota(config: InstanceConfig, clients: Clients) -> Result:
    ec2 = clients["ec2"]
    needed = 1 if config.creates_vpc else 0
    return _count_check(
        config,
        clients,
        name="VPC quota",
        what="VPCs",
        needed=needed,
        quota_id=VPCS_PER_REGION,
        count=lambda: len(_all(ec2, "describe_vpcs", "Vpcs")),
        permission="DescribeVpcs",
    )


def check_eip_quota(config: InstanceConfig, clients: Clients) -> Result:
    ec2 = clients["ec2"]
    needed = config.network.nat_gateways if config.creates_vpc else 0
    return _count_check(
        config,
        clients,
        name="Elastic IP quota",
        what="Elastic IPs",
        needed=needed,
        quota_id=ELASTIC_IPS,
        count=lambda: len(
            ec2.describe_addresses(Filters=[{"Name": "domain", "Values": ["vpc"]}])["Addresses"]
        ),
        permission="DescribeAddresses",
    )


def _all(ec2: Any, operation: str, key: str) -> list[Mapping[str, Any]]:
    items: list[Mapping[str, Any]] = []
    for page in ec2.get_paginator(operation).paginate():
        items.extend(page[key])
    return items
