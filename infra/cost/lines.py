"""The priced lines of a synthesized CloudFormation template: what each billed
resource costs a month at the unit prices of infra/cost/prices.py (the estimate,
its report and the ``cdk synth`` line are :mod:`infra.cost.estimate`).

Pure functions: a template (the dict ``cdk synth`` writes), the instance's
region and its declared load in, priced lines out. The template, not the
configuration, is what is walked, so a construct that adds a billed resource
shows up here without anyone remembering to teach the estimate: a billed
resource type the walk does not know stops it (:data:`NOT_MODELLED`).

Two kinds of line:

* hour- and month-billed resources, from the template: EMR instance groups
  (EC2, the EMR fee, the EBS volumes EMR attaches), an EMR Serverless
  application's workers (vCPU-hours, GB-hours and storage beyond 20 GB a
  worker, by architecture, all month: a streaming job with a fixed executor
  count runs the application's maximum capacity), MSK brokers, their storage
  and monitoring level, NAT gateways and public IPv4 addresses, interface
  endpoints (per AZ), KMS keys, alarms, dashboards, Kinesis shards (with
  extended retention) or on-demand stream-hours;
* volume-driven ones, from the instance's ``expected_load`` and its trigger
  interval: Kinesis PUT payload units or on-demand GB, S3 requests and Glue
  Data Catalog requests per micro-batch and the job's PutMetricData calls (as
  measured on the target's local run: :mod:`infra.cost.requests`), S3
  storage of a month's records, the NAT gateway's data processing of the
  bytes the job reads (Kinesis is reached through the NAT; S3 through the
  VPC's gateway endpoint, free), enhanced fan-out consumer-shard-hours and
  data (a ``SubscribeToShard`` job), and the job's custom CloudWatch metrics.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from infra.cost.prices import HOURS_PER_MONTH, NOT_PRICED_LIVE, PRICE_ROWS, PriceRow, price
from infra.cost.requests import COUNTS_FILE, TargetCounts, read_counts
from model import contract

SECONDS_PER_MONTH: Final = HOURS_PER_MONTH * 3600

# EBS that EMR attaches to an EBS-only instance without an EbsConfiguration
# (GiB per instance, by size), and the root volume of releases 6.10 and later:
# https://docs.aws.amazon.com/emr/latest/ManagementGuide/emr-plan-storage.html
# ("Default Amazon EBS storage for instances") and
# https://docs.aws.amazon.com/emr/latest/ManagementGuide/emr-custom-ami.html
# (15 GiB root from 6.10).
EMR_DEFAULT_EBS_GIB: Final[dict[str, int]] = {
    "large": 32,
    "xlarge": 64,
    "2xlarge": 128,
    "4xlarge": 256,
    "8xlarge": 512,
}
EMR_ROOT_VOLUME_GIB: Final = 15

# CloudWatch metrics each monitoring level adds per broker beyond DEFAULT
# (free): the PER_BROKER rows of
# https://docs.aws.amazon.com/msk/latest/developerguide/metrics-details.html
# number about 30; each bills as a custom metric (MSK pricing page).
MSK_EXTRA_METRICS_PER_BROKER: Final[dict[str, int]] = {"DEFAULT": 0, "PER_BROKER": 30}

# A Kinesis PUT payload unit is a 25 KB chunk of a record (Kinesis pricing
# page); on-demand bills data in records rounded up to 1 KB.
PUT_PAYLOAD_UNIT_BYTES: Final = 25 * 1024
ON_DEMAND_RECORD_ROUNDING: Final = 1024
GB: Final = 1024**3

# Resource types that bill but that the walk does not price: an estimate
# without them would be low without saying so.
NOT_MODELLED: Final = frozenset(
    {
        "AWS::MSK::ServerlessCluster",
        "AWS::EMR::InstanceFleetConfig",
        "AWS::EC2::Instance",
        "AWS::RDS::DBInstance",
        "AWS::ElastiCache::CacheCluster",
    }
)

# The custom metrics an instance publishes in its namespace in every batch or
# check, one series each: the job's per-batch metrics and the supervisor's
# two. CloudWatch bills a custom metric per metric-month, prorated by the hour
# and metered only for the hours it is sent
# (https://aws.amazon.com/cloudwatch/pricing/, "Metrics"), so the series that
# the job sends only when there is something to count are not in the total:
# the failure count per reason (job/monitoring.py sends a reason only for a
# batch that had it: at most len(REASONS) more series, estimate.NOT_PRICED_NOTE)
# and the undeclared-key counts (they depend on the data).
CUSTOM_METRICS: Final = len(contract.ALL_METRICS) + len(
    (contract.SUPERVISOR_RESTARTS, contract.SUPERVISOR_GAVE_UP)
)
# EMR Serverless bills worker storage beyond this, per worker (app-behavior page).
SERVERLESS_FREE_DISK_GB: Final = 20


T = TypeVar("T")


# Resources billed per unit of time, one price each: (type, label, units a
# month per resource, price key).
_COUNTED: Final = (
    ("AWS::EC2::NatGateway", "NAT gateway", HOURS_PER_MONTH, "vpc:nat-gateway"),
    ("AWS::EC2::EIP", "public IPv4 address", HOURS_PER_MONTH, "vpc:public-ipv4"),
    ("AWS::KMS::Key", "KMS keys", 1, "kms:key"),
    ("AWS::CloudWatch::Alarm", "CloudWatch alarms", 1, "cloudwatch:alarm"),
    ("AWS::CloudWatch::Dashboard", "CloudWatch dashboards", 1, "cloudwatch:dashboard"),
)


class TemplateCostError(ValueError):
    """A template the estimate cannot price honestly; the message names the
    resource and what was expected."""


@dataclass(frozen=True)
class Load:
    """What flows through the instance: the declared ``expected_load`` and the
    job's trigger interval (one micro-batch per interval while it keeps up)."""

    records_per_sec: float
    record_bytes: int
    trigger_interval_sec: int
    # The job reads through enhanced fan-out (SubscribeToShard).
    enhanced_fan_out: bool = False

    @property
    def records_per_month(self) -> float:
        return self.records_per_sec * SECONDS_PER_MONTH

    @property
    def batches_per_month(self) -> float:
        return SECONDS_PER_MONTH / self.trigger_interval_sec

    @property
    def gigabytes_per_month(self) -> float:
        return self.records_per_month * self.record_bytes / GB


@dataclass(frozen=True)
class CostLine:
    resource: str
    count: float
    unit: str
    unit_usd: float
    source: str
    # The price row's note; a row ``make cost --live`` could not price says why.
    note: str = ""

    @property
    def priced(self) -> bool:
        return not self.note.startswith(NOT_PRICED_LIVE)

    @property
    def monthly_usd(self) -> float:
        return self.count * self.unit_usd if self.priced else 0.0


def priced_lines(
    template: Mapping[str, Any],
    region: str,
    load: Load,
    *,
    stack: str,
    rows: tuple[PriceRow, ...] = PRICE_ROWS,
    counts: Mapping[str, TargetCounts] | None = None,
) -> tuple[CostLine, ...]:
    """The priced lines of ``template`` (``stack``'s) in ``region`` under ``load``;
    ``counts``: the requests per batch by target (default: the measured ones)."""
    resources: Mapping[str, Mapping[str, Any]] = template.get("Resources", {})
    add = _Lines(region, rows)
    by_type: dict[str, list[tuple[str, Mapping[str, Any]]]] = {}
    for logical_id, resource in resources.items():
        by_type.setdefault(str(resource.get("Type")), []).append(
            (logical_id, resource.get("Properties", {}))
        )
    unpriced = sorted(set(by_type) & NOT_MODELLED)
    if unpriced:
        raise TemplateCostError(
            f"{stack}: {', '.join(unpriced)} bill(s) but infra/cost/lines.py does not price "
            f"{'it' if len(unpriced) == 1 else 'them'}; teach the walk before trusting a total"
        )
    _emr_clusters(add, by_type)
    for logical_id, props in by_type.get("AWS::MSK::Cluster", []):
        _msk(add, logical_id, props)
    for type_, label, each, key in _COUNTED:
        found = len(by_type.get(type_, []))
        if found:
            add(f"{label} x{found}", found * each, key)
    for logical_id, props in by_type.get("AWS::EC2::VPCEndpoint", []):
        if props.get("VpcEndpointType") == "Interface":
            zones = len(_list(logical_id, props, "SubnetIds"))
            add(
                f"interface endpoint {logical_id} ({zones} AZ)",
                zones * HOURS_PER_MONTH,
                "vpc:interface-endpoint",
            )
    for logical_id, props in by_type.get("AWS::EMRServerless::Application", []):
        _serverless(add, logical_id, props)
    for logical_id, props in by_type.get("AWS::Kinesis::Stream", []):
        _kinesis(add, logical_id, props, load)
    # A stack that runs the job (not a shared one), on EMR or EMR Serverless.
    if by_type.get("AWS::EMR::Cluster") or by_type.get("AWS::EMRServerless::Application"):
        target = "emr" if by_type.get("AWS::EMR::Cluster") else "serverless"
        _per_batch(add, load, (counts if counts is not None else read_counts())[target])
        _job_reads(add, load, by_type.get("AWS::Kinesis::Stream", []))
    return tuple(add.lines)


class _Lines:
    """The priced lines so far; ``add`` looks the unit price up (a missing
    row stops the estimate, naming it)."""

    def __init__(self, region: str, rows: tuple[PriceRow, ...]) -> None:
        self.region, self.rows = region, rows
        self.lines: list[CostLine] = []

    def __call__(self, resource: str, count: float, key: str) -> None:
        row = price(key, self.region, self.rows)
        self.lines.append(CostLine(resource, count, row.unit, row.usd, row.source, row.note))


def _emr_clusters(add: _Lines, by_type: Mapping[str, list[tuple[str, Mapping[str, Any]]]]) -> None:
    for logical_id, props in by_type.get("AWS::EMR::Cluster", []):
        for group_name, group in _instance_groups(logical_id, props):
            _emr_group(add, group_name, group)
    for logical_id, props in by_type.get("AWS::EMR::InstanceGroupConfig", []):
        _emr_group(add, f"{logical_id} {props.get('InstanceRole', 'TASK')}", props)


def _instance_groups(
    logical_id: str, props: Mapping[str, Any]
) -> Iterable[tuple[str, Mapping[str, Any]]]:
    instances = props.get("Instances", {})
    if "MasterInstanceFleet" in instances or "CoreInstanceFleet" in instances:
        raise TemplateCostError(f"{logical_id}: instance fleets are not priced; expected groups")
    for key, name in (("MasterInstanceGroup", "primary"), ("CoreInstanceGroup", "core")):
        if key in instances:
            yield name, instances[key]
    for index, group in enumerate(instances.get("TaskInstanceGroups", [])):
        yield f"task {index}", group


def _emr_group(add: _Lines, name: str, group: Mapping[str, Any]) -> None:
    instance_type = _literal(name, group, "InstanceType", str)
    count = _literal(name, group, "InstanceCount", int)
    hours = count * HOURS_PER_MONTH
    add(f"EC2 {instance_type} x{count} ({name})", hours, f"ec2:{instance_type}")
    add(f"EMR fee {instance_type} x{count} ({name})", hours, f"emr:{instance_type}")
    add(
        f"EBS gp2 {name} ({count} x {_emr_ebs_gib(instance_type, group)} GiB)",
        count * _emr_ebs_gib(instance_type, group),
        "ebs:gp2",
    )


def _emr_ebs_gib(instance_type: str, group: Mapping[str, Any]) -> int:
    """Root volume plus the data volumes: declared ones, else EMR's default."""
    configs = group.get("EbsConfiguration", {}).get("EbsBlockDeviceConfigs")
    if configs:
        data = sum(
            int(c["VolumeSpecification"]["SizeInGb"]) * int(c.get("VolumesPerInstance", 1))
            for c in configs
        )
    else:
        size = instance_type.split(".", 1)[1]
        if size not in EMR_DEFAULT_EBS_GIB:
            raise TemplateCostError(
                f"{instance_type}: EMR's default EBS for size {size!r} is not in "
                f"EMR_DEFAULT_EBS_GIB ({', '.join(EMR_DEFAULT_EBS_GIB)})"
            )
        data = EMR_DEFAULT_EBS_GIB[size]
    return EMR_ROOT_VOLUME_GIB + data


def _msk(add: _Lines, logical_id: str, props: Mapping[str, Any]) -> None:
    brokers = _literal(logical_id, props, "NumberOfBrokerNodes", int)
    group = props.get("BrokerNodeGroupInfo", {})
    broker_type = _literal(logical_id, group, "InstanceType", str)
    add(
        f"MSK {broker_type} x{brokers} ({logical_id})",
        brokers * HOURS_PER_MONTH,
        f"msk:{broker_type}",
    )
    volume = int(group.get("StorageInfo", {}).get("EBSStorageInfo", {}).get("VolumeSize", 1000))
    add(f"MSK storage {brokers} x {volume} GiB", brokers * volume, "msk:storage")
    level = str(props.get("EnhancedMonitoring", "DEFAULT"))
    if level not in MSK_EXTRA_METRICS_PER_BROKER:
        raise TemplateCostError(
            f"{logical_id}: EnhancedMonitoring {level!r} is not priced; "
            f"expected {', '.join(MSK_EXTRA_METRICS_PER_BROKER)}"
        )
    extra = MSK_EXTRA_METRICS_PER_BROKER[level]
    if extra:
        add(f"MSK {level} metrics ({brokers} x {extra})", brokers * extra, "cloudwatch:metric")


def _kinesis(add: _Lines, logical_id: str, props: Mapping[str, Any], load: Load) -> None:
    mode = props.get("StreamModeDetails", {}).get("StreamMode", "PROVISIONED")
    if mode == "ON_DEMAND":
        add(f"Kinesis on-demand stream ({logical_id})", HOURS_PER_MONTH, "kinesis:on-demand-stream")
        rounded = math.ceil(load.record_bytes / ON_DEMAND_RECORD_ROUNDING) * 1024
        gigabytes = load.records_per_month * rounded / GB
        add(f"Kinesis on-demand data in ({gigabytes:,.1f} GB)", gigabytes, "kinesis:on-demand-in")
        add(
            f"Kinesis on-demand data out ({gigabytes:,.1f} GB, one reader)",
            gigabytes,
            "kinesis:on-demand-out",
        )
        return
    shards = _literal(logical_id, props, "ShardCount", int)
    add(f"Kinesis shards x{shards} ({logical_id})", shards * HOURS_PER_MONTH, "kinesis:shard")
    if int(props.get("RetentionPeriodHours", 24)) > 24:
        add(
            f"Kinesis extended retention x{shards}",
            shards * HOURS_PER_MONTH,
            "kinesis:extended-retention",
        )
    units = load.records_per_month * math.ceil(load.record_bytes / PUT_PAYLOAD_UNIT_BYTES)
    add("Kinesis PUT payload units (millions)", units / 1e6, "kinesis:put-payload-unit")


def _per_batch(add: _Lines, load: Load, measured: TargetCounts) -> None:
    """The requests of a month of batches, at the counts measured on the
    target's local run (each row names them)."""
    batches = load.batches_per_month
    every = f"{batches:,.0f} batches, one per {load.trigger_interval_sec} s"
    source = f"measured, {measured.target} run {measured.measured}, {COUNTS_FILE.name}"
    # (what, per batch, requests a priced unit, price key)
    requests = (
        (f"S3 PUT/COPY/LIST, {measured.s3_put_class:.1f} per batch ({every}; {source})",
         measured.s3_put_class, 1000, "s3:put"),
        (f"S3 GET/HEAD, {measured.s3_get_class:.1f} per batch ({source})",
         measured.s3_get_class, 1000, "s3:get"),
        (f"Glue Data Catalog requests, {measured.glue:.1f} per batch (millions; {source})",
         measured.glue, 1e6, "glue:catalog-request"),
        (f"CloudWatch PutMetricData, {measured.put_metric_data:.1f} per batch ({source})",
         measured.put_metric_data, 1000, "cloudwatch:put-metric-data"),
    )  # fmt: skip
    for what, per_batch, per_unit, key in requests:
        add(what, batches * per_batch / per_unit, key)
    gigabytes = load.records_per_month * load.record_bytes / GB
    add(
        f"S3 storage, a month of records ({gigabytes:,.1f} GB, uncompressed)",
        gigabytes,
        "s3:storage",
    )


def _serverless(add: _Lines, logical_id: str, props: Mapping[str, Any]) -> None:
    """The application's workers all month: its maximum capacity is the
    driver plus the fixed executors (infra/serverless/app.py), and
    a streaming run holds them all the time."""
    capacity = props.get("MaximumCapacity", {})
    vcpu = _quantity(logical_id, capacity, "Cpu", "vCPU")
    memory = _quantity(logical_id, capacity, "Memory", "GB")
    disk = _quantity(logical_id, capacity, "Disk", "GB")
    workers = 1 + int(_spark_default(logical_id, props, "spark.executor.instances"))
    architecture = str(props.get("Architecture", "X86_64"))
    kind = {"ARM64": "arm", "X86_64": "x86"}.get(architecture)
    if kind is None:
        raise TemplateCostError(
            f"{logical_id}: Architecture {architecture!r}; expected ARM64 or X86_64"
        )
    if "InitialCapacity" in props:
        raise TemplateCostError(
            f"{logical_id}: InitialCapacity (pre-initialized workers, billed while idle) "
            "is not priced"
        )
    add(
        f"EMR Serverless {architecture} vCPU ({vcpu:g} vCPU, {workers} workers)",
        vcpu * HOURS_PER_MONTH,
        f"emr-serverless:vcpu-{kind}",
    )
    add(
        f"EMR Serverless {architecture} memory ({memory:g} GB)",
        memory * HOURS_PER_MONTH,
        f"emr-serverless:gb-{kind}",
    )
    extra = max(0.0, disk - SERVERLESS_FREE_DISK_GB * workers)
    if extra:
        add(
            f"EMR Serverless storage beyond {SERVERLESS_FREE_DISK_GB} GB a worker ({extra:g} GB)",
            extra * HOURS_PER_MONTH,
            "emr-serverless:storage",
        )


def _quantity(where: str, props: Mapping[str, Any], name: str, unit: str) -> float:
    """``"2 vCPU"`` / ``"4 GB"`` (the API's capacity strings) as a number."""
    value = props.get(name)
    number, _, found = str(value).partition(" ")
    try:
        amount = float(number)
    except ValueError:
        amount = -1.0
    if amount < 0 or found != unit:
        raise TemplateCostError(
            f"{where}: MaximumCapacity.{name} is {value!r}; expected 'N {unit}'"
        )
    return amount


def _spark_default(where: str, props: Mapping[str, Any], key: str) -> str:
    for classification in props.get("RuntimeConfiguration", []):
        if classification.get("Classification") == "spark-defaults":
            found = classification.get("Properties", {}).get(key)
            if isinstance(found, str):
                return found
    raise TemplateCostError(f"{where}: no {key} in its spark-defaults; expected a literal")


def _job_reads(add: _Lines, load: Load, streams: list[tuple[str, Mapping[str, Any]]]) -> None:
    """What reading the stream costs beyond Kinesis's own lines: the NAT's data
    processing (the job reaches Kinesis through the NAT), enhanced fan-out,
    and the job's custom metrics."""
    gigabytes = load.gigabytes_per_month
    add(
        f"NAT data processing, the job's Kinesis reads ({gigabytes:,.1f} GB)",
        gigabytes,
        "vpc:nat-data",
    )
    if load.enhanced_fan_out:
        for logical_id, props in streams:
            mode = props.get("StreamModeDetails", {}).get("StreamMode", "PROVISIONED")
            if mode == "ON_DEMAND":
                add(
                    f"Kinesis enhanced fan-out data, on-demand ({gigabytes:,.1f} GB)",
                    gigabytes,
                    "kinesis:on-demand-efo-data",
                )
                continue
            shards = _literal(logical_id, props, "ShardCount", int)
            add(
                f"Kinesis enhanced fan-out, 1 consumer x{shards} shards",
                shards * HOURS_PER_MONTH,
                "kinesis:efo-consumer-shard",
            )
            add(
                f"Kinesis enhanced fan-out data ({gigabytes:,.1f} GB)",
                gigabytes,
                "kinesis:efo-data",
            )
    add(
        f"CloudWatch custom metrics ({CUSTOM_METRICS}, sent every batch or check)",
        CUSTOM_METRICS,
        "cloudwatch:metric",
    )


def _literal(where: str, props: Mapping[str, Any], name: str, kind: type[T]) -> T:
    value = props.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TemplateCostError(
            f"{where}: {name} is {value!r}; expected a literal {kind.__name__} "
            "(a token resolved at deploy time cannot be priced)"
        )
    return value


def _list(where: str, props: Mapping[str, Any], name: str) -> list[Any]:
    value = props.get(name)
    if not isinstance(value, list) or not value:
        raise TemplateCostError(f"{where}: {name} is {value!r}; expected a non-empty list")
    return value
