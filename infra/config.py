"""Instance configuration: the typed, frozen description of one deployment.

An *instance* is one business domain in one region (DESIGN.md §1). Instances
are declared in ``cdk.json`` context under ``streaming``::

    {"streaming": {"defaults": {...}, "instances": [{"domain": ..., "region": ...}]}}

Each instance is the ``defaults`` object deep-merged with its own entry, then
parsed here. A bad value stops ``cdk synth`` before any construct exists, with
a message naming the instance, the field, the value and what is allowed, so a
typo never turns into a half-built stack or a resource with a surprising name.

Resource names are not configurable: they come from :mod:`app.contract`, which
the job reads too, so the job and the stack cannot disagree on a name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path
from types import NoneType, UnionType
from typing import Any, Final, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

from app import contract
from app.config import MIN_FETCH_TIME_SEC, ConsumerType, SourceOptions, StartingPosition
from infra.sizing import INSTANCE_TYPES

CONTEXT_KEY: Final = "streaming"
DEFAULT_RELEASE_LABEL: Final = "emr-spark-8.0.0"

RemovalPolicyName = Literal["RETAIN", "DESTROY"]

# A domain is a fragment of a Glue database name (lowercase, digits, `_`), a
# Kinesis stream name, a Kafka topic name and a CloudFormation stack name (no
# `_`): lowercase alphanumerics fit all four.
DOMAIN_PATTERN: Final = re.compile(r"^[a-z][a-z0-9]{1,30}$")
REGION_PATTERN: Final = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
ACCOUNT_PATTERN: Final = re.compile(r"^\d{12}$")
RELEASE_LABEL_PATTERN: Final = re.compile(r"^emr-(spark-)?\d+\.\d+\.\d+$")
MSK_CLUSTER_ARN_PATTERN: Final = re.compile(
    r"^arn:aws(-[a-z]+)*:kafka:(?P<region>[a-z0-9-]+):(?P<account>\d{12}):"
    r"cluster/[A-Za-z0-9-]{1,64}/[A-Za-z0-9-]{1,64}$"
)
KAFKA_VERSION_PATTERN: Final = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)\.(\d+|x)(\.kraft)?$")
MSK_BROKER_TYPE_PATTERN: Final = re.compile(r"^kafka\.[a-z0-9]+\.[a-z0-9]+$")
EC2_INSTANCE_TYPE_PATTERN: Final = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")
VPC_ID_PATTERN: Final = re.compile(r"^vpc-[0-9a-f]{8,17}$")
SUBNET_ID_PATTERN: Final = re.compile(r"^subnet-[0-9a-f]{8,17}$")
CIDR_PATTERN: Final = re.compile(r"^\d{1,3}(\.\d{1,3}){3}/(1[6-9]|2[0-8])$")
TLS_ZIP_URI_PATTERN: Final = re.compile(
    r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>.+\.zip)$"
)
EMAIL_PATTERN: Final = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")

MIN_KAFKA_VERSION: Final = (3, 6)  # AWS::MSK::Topic needs Kafka >= 3.6
MAX_RETENTION_HOURS: Final = 8760  # Kinesis allows 24 h .. 365 days


class InstanceConfigError(ValueError):
    """An instance declaration that cannot be deployed; the message says where and why."""


@dataclass(frozen=True)
class StreamConfig:
    """``shard_count`` null means on-demand capacity (no shard planning)."""

    shard_count: int | None = None
    retention_hours: int = 24

    @property
    def on_demand(self) -> bool:
        return self.shard_count is None


@dataclass(frozen=True)
class SourceConfig:
    """Kinesis source options the job reads; names match ``app.config.SourceOptions``.

    ``starting_position`` applies only when the checkpoint is empty; the default
    TRIM_HORIZON never silently skips data on a first start (DESIGN.md §1).
    """

    # Defaults are the job's own (one source): an instance that omits a field
    # gets exactly what the job would assume.
    starting_position: StartingPosition = SourceOptions.starting_position
    max_fetch_records_per_shard: int = SourceOptions.max_fetch_records_per_shard
    max_fetch_time_per_shard_sec: int = SourceOptions.max_fetch_time_per_shard_sec
    describe_shard_interval_sec: int = SourceOptions.describe_shard_interval_sec
    consumer_type: ConsumerType = SourceOptions.consumer_type


@dataclass(frozen=True)
class JobSettings:
    trigger_interval_sec: int = 10
    source: SourceConfig = field(default_factory=SourceConfig)


@dataclass(frozen=True)
class EmrConfig:
    release_label: str = DEFAULT_RELEASE_LABEL
    master_instance_type: str = "m5.xlarge"
    master_instance_count: int = 1
    core_instance_type: str = "m5.xlarge"
    core_instance_count: int = 2
    # In-transit encryption needs a PEM zip (privateKey.pem, certificateChain.pem,
    # trustedCertificates.pem) that exists before the cluster starts; see docs/infra.md.
    tls_certificates_s3_uri: str = ""

    @property
    def tls_certificates_bucket(self) -> str:
        found = TLS_ZIP_URI_PATTERN.fullmatch(self.tls_certificates_s3_uri)
        return found["bucket"] if found else ""

    @property
    def tls_certificates_key(self) -> str:
        found = TLS_ZIP_URI_PATTERN.fullmatch(self.tls_certificates_s3_uri)
        return found["key"] if found else ""


@dataclass(frozen=True)
class AlarmConfig:
    """Thresholds of the delay alarms (DESIGN.md §1: the 3-minute-late batch).

    The batch-duration alarm compares against the trigger interval itself, so it
    has no threshold of its own, only how many of how many periods must breach.
    """

    emails: tuple[str, ...] = ()
    period_sec: int = 60
    iterator_age_ms: int = 60_000
    batch_duration_datapoints: int = 3
    batch_duration_evaluation_periods: int = 5
    end_to_end_latency_ms: int = 120_000
    scheduling_delay_ratio: float = 0.5
    failure_records: int = 100
    heartbeat_missing_periods: int = 3


@dataclass(frozen=True)
class NetworkConfig:
    """An existing VPC is imported without lookups (synth stays offline), so its
    availability zones and private subnet ids are required alongside its id.
    Without ``vpc_id`` the stack creates a VPC from ``vpc_cidr``."""

    vpc_id: str | None = None
    availability_zones: tuple[str, ...] = ()
    private_subnet_ids: tuple[str, ...] = ()
    vpc_cidr: str = "10.0.0.0/16"
    nat_gateways: int = 1


@dataclass(frozen=True)
class KafkaConfig:
    """The failure topic, on ``cluster_arn`` or on a cluster the stack creates.

    ``version``, ``broker_*`` describe the created cluster and are ignored when
    ``cluster_arn`` is set.
    """

    cluster_arn: str | None = None
    version: str = "3.6.0"
    broker_instance_type: str = "kafka.m5.large"
    broker_count: int = 2
    broker_volume_gib: int = 100
    topic_partitions: int = 6
    topic_replication_factor: int = 2
    topic_retention_hours: int = 168

    @property
    def min_insync_replicas(self) -> int:
        """One replica may be down without blocking ``acks=all`` producers."""
        return max(1, self.topic_replication_factor - 1)


@dataclass(frozen=True)
class InstanceConfig:
    """One domain in one region; everything its stack needs, validated."""

    domain: str
    region: str
    account: str | None = None
    removal_policy: RemovalPolicyName = "RETAIN"
    termination_protection: bool = False
    stream: StreamConfig = field(default_factory=StreamConfig)
    emr: EmrConfig = field(default_factory=EmrConfig)
    job: JobSettings = field(default_factory=JobSettings)
    alarms: AlarmConfig = field(default_factory=AlarmConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    kafka: KafkaConfig = field(default_factory=KafkaConfig)

    @property
    def instance_id(self) -> str:
        return contract.instance_id(self.domain, self.region)

    @property
    def stack_name(self) -> str:
        return contract.stack_name(self.domain, self.region)

    @property
    def stream_name(self) -> str:
        return contract.stream_name(self.domain, self.region)

    @property
    def database_name(self) -> str:
        return contract.database_name(self.domain, self.region)

    @property
    def failure_topic_name(self) -> str:
        return contract.failure_topic_name(self.domain, self.region)


# --------------------------------------------------------------------------- loading


def read_cdk_context(path: str | Path) -> Mapping[str, Any]:
    """The ``context`` object of a ``cdk.json`` (for callers outside the CDK app,
    e.g. the local run, which must see the same instances)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    context = raw.get("context", {}) if isinstance(raw, dict) else {}
    if not isinstance(context, dict):
        raise InstanceConfigError(f"{path}: 'context' must be an object")
    return context


def load_instances(context: Mapping[str, Any]) -> list[InstanceConfig]:
    """Parse every instance declared under ``context["streaming"]``.

    Raises :class:`InstanceConfigError` on the first invalid value.
    """
    section = context.get(CONTEXT_KEY)
    if not isinstance(section, Mapping):
        raise InstanceConfigError(
            f"context.{CONTEXT_KEY}: missing or not an object; expected "
            '{"defaults": {...}, "instances": [{"domain": ..., "region": ...}, ...]}'
        )
    unknown = sorted(set(section) - {"defaults", "instances"})
    if unknown:
        raise InstanceConfigError(
            f"context.{CONTEXT_KEY}.{unknown[0]}: unknown field; allowed: defaults, instances"
        )
    defaults = section.get("defaults", {})
    if not isinstance(defaults, Mapping):
        raise InstanceConfigError(f"context.{CONTEXT_KEY}.defaults: expected an object")
    declared = section.get("instances")
    if not isinstance(declared, list) or not declared:
        raise InstanceConfigError(
            f"context.{CONTEXT_KEY}.instances: expected a non-empty list of instances, "
            f"got {declared!r}"
        )
    instances: list[InstanceConfig] = []
    seen: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(declared):
        if not isinstance(entry, Mapping):
            raise InstanceConfigError(f"instances[{index}]: expected an object, got {entry!r}")
        name = _label(index, entry)
        merged = _deep_merge(defaults, entry)
        config = _build(InstanceConfig, merged, name, "")
        _validate(config, name)
        key = (config.domain, config.region)
        if key in seen:
            raise InstanceConfigError(
                f"instance {name}: field domain/region: duplicate value "
                f"{config.domain!r}/{config.region!r} "
                f"(already declared by instances[{seen[key]}]); "
                "allowed: each (domain, region) pair once"
            )
        seen[key] = index
        instances.append(config)
    return instances


def _label(index: int, entry: Mapping[str, Any]) -> str:
    domain, region = entry.get("domain"), entry.get("region")
    return f"instances[{index}] ({domain}/{region})"


def _deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = dict(base)
    for key, value in override.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = _deep_merge(current, value)
        else:
            merged[key] = value
    return merged


# --------------------------------------------------------------------------- typed parsing

T = TypeVar("T")


def _fail(instance: str, path: str, value: object, allowed: str) -> InstanceConfigError:
    return InstanceConfigError(
        f"instance {instance}: field {path}: bad value {value!r}; allowed: {allowed}"
    )


def _build(cls: type[T], raw: object, instance: str, prefix: str) -> T:
    if not isinstance(raw, Mapping):
        raise _fail(instance, prefix.rstrip(".") or "<instance>", raw, "an object")
    if not is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")  # a bug in this module, not bad input
    hints = get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise InstanceConfigError(
            f"instance {instance}: field {prefix}{unknown[0]}: unknown field; "
            f"allowed: {', '.join(sorted(known))}"
        )
    values: dict[str, Any] = {}
    for name, spec in known.items():
        path = f"{prefix}{name}"
        if name not in raw:
            if spec.default is MISSING and spec.default_factory is MISSING:
                raise InstanceConfigError(
                    f"instance {instance}: field {path}: missing required field"
                )
            continue
        values[name] = _coerce(hints[name], raw[name], instance, path)
    return cls(**values)


def _coerce(annotation: Any, value: object, instance: str, path: str) -> Any:
    origin = get_origin(annotation)
    if origin in (Union, UnionType):
        members = [a for a in get_args(annotation) if a is not NoneType]
        if value is None:
            return None
        return _coerce(members[0], value, instance, path)
    if origin is Literal:
        allowed = get_args(annotation)
        if value not in allowed:
            raise _fail(instance, path, value, " | ".join(allowed))
        return value
    if origin is tuple:
        (item_type, _ellipsis) = get_args(annotation)
        if not isinstance(value, list):
            raise _fail(instance, path, value, "a list")
        return tuple(
            _coerce(item_type, item, instance, f"{path}[{i}]") for i, item in enumerate(value)
        )
    if isinstance(annotation, type) and is_dataclass(annotation):
        return _build(annotation, value, instance, f"{path}.")
    if annotation is bool:
        if not isinstance(value, bool):
            raise _fail(instance, path, value, "true or false")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(instance, path, value, "an integer")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _fail(instance, path, value, "a number")
        return float(value)
    if annotation is str:
        if not isinstance(value, str) or not value:
            raise _fail(instance, path, value, "a non-empty string")
        return value
    raise TypeError(f"{path}: unsupported annotation {annotation!r}")  # a bug in this module


# --------------------------------------------------------------------------- semantic checks


def _validate(c: InstanceConfig, name: str) -> None:
    _match(name, "domain", c.domain, DOMAIN_PATTERN, "2-31 lowercase letters/digits, starting a-z")
    _match(name, "region", c.region, REGION_PATTERN, "an AWS region name such as eu-west-1")
    if c.account is not None:
        _match(name, "account", c.account, ACCOUNT_PATTERN, "12 digits or null")

    if c.stream.shard_count is not None and c.stream.shard_count < 1:
        raise _fail(name, "stream.shard_count", c.stream.shard_count, "an integer >= 1, or null")
    if not 24 <= c.stream.retention_hours <= MAX_RETENTION_HOURS:
        raise _fail(
            name, "stream.retention_hours", c.stream.retention_hours, f"24..{MAX_RETENTION_HOURS}"
        )

    _validate_emr(c.emr, name)
    _validate_job(c.job, name)
    _validate_alarms(c.alarms, name)
    _validate_network(c.network, name)
    _validate_kafka(c.kafka, c.region, name)
    if c.kafka.cluster_arn is None:
        subnets = msk_client_subnets(c.network)
        if c.kafka.broker_count % subnets:
            raise _fail(
                name,
                "kafka.broker_count",
                c.kafka.broker_count,
                f"a multiple of the {subnets} client subnets the created MSK cluster spans",
            )


def msk_client_subnets(network: NetworkConfig) -> int:
    """How many private subnets a created MSK cluster spans (MSK takes 2 or 3)."""
    if network.vpc_id is None:
        return max(2, min(3, len(network.availability_zones)))
    return min(3, len(network.private_subnet_ids))


def _match(name: str, path: str, value: str, pattern: re.Pattern[str], allowed: str) -> None:
    if not pattern.fullmatch(value):
        raise _fail(name, path, value, allowed)


def _positive(name: str, path: str, value: float) -> None:
    if value <= 0:
        raise _fail(name, path, value, "a number > 0")


def _validate_emr(emr: EmrConfig, name: str) -> None:
    _match(
        name,
        "emr.release_label",
        emr.release_label,
        RELEASE_LABEL_PATTERN,
        f"an EMR release label such as {DEFAULT_RELEASE_LABEL} or emr-7.9.0",
    )
    _match(
        name,
        "emr.master_instance_type",
        emr.master_instance_type,
        EC2_INSTANCE_TYPE_PATTERN,
        "an EC2 instance type such as m5.xlarge",
    )
    if emr.master_instance_count not in (1, 3):
        raise _fail(name, "emr.master_instance_count", emr.master_instance_count, "1 or 3")
    if emr.core_instance_type not in INSTANCE_TYPES:
        raise _fail(
            name,
            "emr.core_instance_type",
            emr.core_instance_type,
            ", ".join(sorted(INSTANCE_TYPES)),
        )
    if not emr.tls_certificates_s3_uri:
        raise InstanceConfigError(
            f"instance {name}: field emr.tls_certificates_s3_uri: missing required field; "
            "allowed: s3://<bucket>/<key>.zip holding the PEM certificates (docs/infra.md)"
        )
    _match(
        name,
        "emr.tls_certificates_s3_uri",
        emr.tls_certificates_s3_uri,
        TLS_ZIP_URI_PATTERN,
        "s3://<bucket>/<key>.zip holding the PEM certificates for in-transit encryption",
    )
    if emr.core_instance_count < 1:
        raise _fail(name, "emr.core_instance_count", emr.core_instance_count, "an integer >= 1")


def _validate_job(job: JobSettings, name: str) -> None:
    _positive(name, "job.trigger_interval_sec", job.trigger_interval_sec)
    src = job.source
    _positive(name, "job.source.max_fetch_records_per_shard", src.max_fetch_records_per_shard)
    if src.max_fetch_time_per_shard_sec < MIN_FETCH_TIME_SEC:
        raise _fail(
            name,
            "job.source.max_fetch_time_per_shard_sec",
            src.max_fetch_time_per_shard_sec,
            f"an integer >= {MIN_FETCH_TIME_SEC} (the Kinesis connector's minimum)",
        )
    _positive(name, "job.source.describe_shard_interval_sec", src.describe_shard_interval_sec)


def _validate_alarms(alarms: AlarmConfig, name: str) -> None:
    for path in (
        "period_sec",
        "iterator_age_ms",
        "batch_duration_datapoints",
        "batch_duration_evaluation_periods",
        "end_to_end_latency_ms",
        "scheduling_delay_ratio",
        "failure_records",
        "heartbeat_missing_periods",
    ):
        _positive(name, f"alarms.{path}", getattr(alarms, path))
    if alarms.period_sec not in (10, 30) and alarms.period_sec % 60:
        raise _fail(name, "alarms.period_sec", alarms.period_sec, "10, 30 or a multiple of 60")
    if alarms.scheduling_delay_ratio > 1:
        raise _fail(
            name, "alarms.scheduling_delay_ratio", alarms.scheduling_delay_ratio, "0 < ratio <= 1"
        )
    if alarms.batch_duration_datapoints > alarms.batch_duration_evaluation_periods:
        raise _fail(
            name,
            "alarms.batch_duration_datapoints",
            alarms.batch_duration_datapoints,
            f"<= alarms.batch_duration_evaluation_periods "
            f"({alarms.batch_duration_evaluation_periods})",
        )
    for i, email in enumerate(alarms.emails):
        _match(name, f"alarms.emails[{i}]", email, EMAIL_PATTERN, "an e-mail address")


def _validate_network(net: NetworkConfig, name: str) -> None:
    _match(name, "network.vpc_cidr", net.vpc_cidr, CIDR_PATTERN, "an IPv4 CIDR /16../28")
    if net.nat_gateways < 1:
        raise _fail(
            name, "network.nat_gateways", net.nat_gateways, "an integer >= 1 (private egress)"
        )
    if net.vpc_id is None:
        if net.availability_zones and len(net.availability_zones) < 2:
            raise _fail(
                name,
                "network.availability_zones",
                list(net.availability_zones),
                "empty (the created VPC uses 2 zones of the region) or at least 2 zones",
            )
        if net.private_subnet_ids:
            raise _fail(
                name,
                "network.private_subnet_ids",
                list(net.private_subnet_ids),
                "empty unless network.vpc_id is set",
            )
        return
    _match(name, "network.vpc_id", net.vpc_id, VPC_ID_PATTERN, "vpc-<hex> or null")
    if len(net.private_subnet_ids) < 2:
        raise _fail(
            name,
            "network.private_subnet_ids",
            list(net.private_subnet_ids),
            "at least 2 private subnet ids in different AZs when network.vpc_id is set",
        )
    for i, subnet in enumerate(net.private_subnet_ids):
        _match(name, f"network.private_subnet_ids[{i}]", subnet, SUBNET_ID_PATTERN, "subnet-<hex>")
    if len(net.availability_zones) != len(net.private_subnet_ids):
        raise _fail(
            name,
            "network.availability_zones",
            list(net.availability_zones),
            "one availability zone per private subnet id, in the same order",
        )


def _validate_kafka(kafka: KafkaConfig, region: str, name: str) -> None:
    for path in (
        "topic_partitions",
        "topic_replication_factor",
        "topic_retention_hours",
        "broker_count",
        "broker_volume_gib",
    ):
        value = getattr(kafka, path)
        if value < 1:
            raise _fail(name, f"kafka.{path}", value, "an integer >= 1")
    if kafka.cluster_arn is not None:
        found = MSK_CLUSTER_ARN_PATTERN.fullmatch(kafka.cluster_arn)
        if found is None:
            raise _fail(
                name,
                "kafka.cluster_arn",
                kafka.cluster_arn,
                "arn:aws:kafka:<region>:<12-digit account>:cluster/<name>/<uuid>, or null",
            )
        if found["region"] != region:
            raise _fail(
                name,
                "kafka.cluster_arn",
                kafka.cluster_arn,
                f"a cluster in the instance's region {region} (topics are regional)",
            )
        return
    version = KAFKA_VERSION_PATTERN.fullmatch(kafka.version)
    if version is None or (int(version["major"]), int(version["minor"])) < MIN_KAFKA_VERSION:
        raise _fail(
            name, "kafka.version", kafka.version, "an MSK Kafka version >= 3.6 such as 3.6.0"
        )
    _match(
        name,
        "kafka.broker_instance_type",
        kafka.broker_instance_type,
        MSK_BROKER_TYPE_PATTERN,
        "an MSK broker type such as kafka.m5.large",
    )
    if kafka.broker_count < 2:
        raise _fail(name, "kafka.broker_count", kafka.broker_count, "an integer >= 2")
    if kafka.topic_replication_factor > kafka.broker_count:
        raise _fail(
            name,
            "kafka.topic_replication_factor",
            kafka.topic_replication_factor,
            f"<= kafka.broker_count ({kafka.broker_count})",
        )
