"""Instance configuration: the typed, frozen description of one deployment.

An *instance* is one business domain in one region (docs/design.md). Instances
are declared in ``cdk.json`` context under ``streaming``::

    {"streaming": {"defaults": {...}, "instances": [{"domain": ..., "region": ...}]}}

Each instance is the ``defaults`` object deep-merged with its own entry, then
validated by the pydantic models here. Field defaults live in the models only
(``defaults`` is for what a deployment chooses for all its instances); the
``job`` section is the job's own :class:`model.config.JobSettings`, so an
instance and the job cannot disagree on an option's name, bounds or default.
A bad value stops ``cdk synth`` before any construct exists, with a line per
bad field naming the instance, the field, the value and what is allowed, so a
typo never turns into a half-built stack or a resource with a surprising name.

Resource names are not configurable: they come from :mod:`model.contract`, which
the job reads too, so the job and the stack cannot disagree on a name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self, TypeVar

from pydantic import BaseModel, Field, PositiveInt, ValidationError, model_validator

from infra.deployed import replication_factor_problem, shard_count_problem
from infra.releases import (
    EMR_REGIONS_PAGE,
    JOB_SPARK_VERSION,
    Release,
    known_regions,
    release_for,
    supported_labels,
)
from infra.schema_change import EventSchemaDeclaration, is_additive
from infra.serverless_config import (
    NO_TLS_ON_SERVERLESS,
    ComputeName,
    ServerlessConfig,
    serverless_problem,
)
from infra.sizes import SIZES, SizeName
from infra.sizing import INSTANCE_TYPES, size_executors
from infra.table_definition import pinned_seed_fields
from model import contract
from model.config import JobSettings, MaxMessageBytes
from model.config_kit import Allowed, ConfigModel, JsonTuple, bad_value, problems
from model.failure_limits import DEFAULT_MAX_MESSAGE_BYTES

CONTEXT_KEY: Final = "streaming"
DEFAULT_RELEASE_LABEL: Final = "emr-spark-8.1.0"

RemovalPolicyName = Literal["RETAIN", "DESTROY"]

# A domain is a fragment of a Glue database name (lowercase, digits, `_`), a
# Kinesis stream name, a Kafka topic name and a CloudFormation stack name (no
# `_`): lowercase alphanumerics fit all four.
DOMAIN_PATTERN: Final = re.compile(r"^[a-z][a-z0-9]{1,30}$")
ACCOUNT_PATTERN: Final = re.compile(r"^\d{12}$")
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
SHA256_PATTERN: Final = re.compile(r"^[0-9a-f]{64}$")

MIN_KAFKA_VERSION: Final = (3, 6)  # AWS::MSK::Topic needs Kafka >= 3.6
# A created cluster's Kafka: MSK's recommended version, with no end-of-support
# date published; MSK phases out newly created clusters on versions that have
# one ("Supported Apache Kafka versions",
# https://docs.aws.amazon.com/msk/latest/developerguide/supported-kafka-versions.html;
# "Amazon MSK version support",
# https://docs.aws.amazon.com/msk/latest/developerguide/version-support.html).
MSK_VERSIONS_PAGE: Final = (
    "https://docs.aws.amazon.com/msk/latest/developerguide/supported-kafka-versions.html"
)
DEFAULT_KAFKA_VERSION: Final = "3.8.x"
# Versions >= 3.6 with a published end-of-support date (the same page), refused
# for a cluster the stack creates.
KAFKA_END_OF_SUPPORT: Final = {"3.6.0": "2026-06-01"}
# Kinesis Data Streams' default shard quota per account and Region, provisioned
# mode: 20,000 in us-east-1, us-west-2 and eu-west-1, "1,000 or 6,000" in the
# others (the lower is the bound: "Quotas and limits",
# https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html).
# ``stream.shard_quota`` raises it to the account's real quota, which
# ``make preflight`` reads (scripts/preflight/shard_bound.py).
KINESIS_QUOTAS_PAGE: Final = (
    "https://docs.aws.amazon.com/streams/latest/dev/service-sizes-and-limits.html"
)
KINESIS_LARGE_QUOTA_REGIONS: Final = ("us-east-1", "us-west-2", "eu-west-1")
KINESIS_LARGE_DEFAULT_SHARDS: Final = 20_000
KINESIS_DEFAULT_SHARDS: Final = 1_000
CREATED_VPC_ZONES: Final = 3  # zones a created VPC spans when none are listed
# The shipped example's TLS zips live in this bucket: it does not exist, so a
# cluster created with one fails. ``build_app`` refuses them unless the synth is
# a check of the example (``SYNTH_CHECK_CONTEXT_KEY``); ``make certs`` creates
# the real one. The example gives each instance its own key under it
# (:func:`placeholder_tls_uri`): synth refuses a zip two instances share.
PLACEHOLDER_TLS_BUCKET: Final = "example-emr-tls-certificates"
PLACEHOLDER_TLS_URI: Final = f"s3://{PLACEHOLDER_TLS_BUCKET}/streaming/certificates.zip"
SYNTH_CHECK_CONTEXT_KEY: Final = "streaming:synth-check"
# ``-c streaming:instances=orders-eu-west-1,...``: synthesize (and so deploy)
# only these instances and the shared stacks they use; the placeholder refusal
# looks at them only (infra/stacks/application.py, docs/deploy.md "First deploy").
SELECTION_CONTEXT_KEY: Final = "streaming:instances"
MAX_RETENTION_HOURS: Final = 8760  # Kinesis allows 24 h .. 365 days


class InstanceConfigError(ValueError):
    """An instance declaration that cannot be deployed; the message says where and why."""


_Model = TypeVar("_Model", bound=BaseModel)


def validated(model: type[_Model], entry: Any, name: str, whole: str) -> _Model:
    """``entry`` as a ``model``, or an :class:`InstanceConfigError` with one line
    per problem: ``<name>: field <path>: <what>`` (``whole`` names the entry
    itself, for a problem with no path). Instances and shared regions say it alike."""
    try:
        return model.model_validate(entry)
    except ValidationError as exc:
        lines = [f"{name}: field {p.path or whole}: {p.text}" for p in problems(exc, model)]
        raise InstanceConfigError("\n".join(lines)) from exc


def _matches(pattern: re.Pattern[str], allowed: str) -> Allowed:
    """The whole string must match (``fullmatch``: a trailing newline is not
    tolerated, as ``re.match`` with ``$`` would)."""
    return Allowed(lambda value: pattern.fullmatch(value) is not None, allowed)


def _kafka_version_supported(value: str) -> bool:
    found = KAFKA_VERSION_PATTERN.fullmatch(value)
    return found is not None and (int(found["major"]), int(found["minor"])) >= MIN_KAFKA_VERSION


Domain = Annotated[str, _matches(DOMAIN_PATTERN, "2-31 lowercase letters/digits, starting a-z")]
Region = Annotated[
    str,
    Allowed(
        lambda value: value in known_regions(),
        f"a Region where Amazon EMR runs, such as eu-west-1 ({EMR_REGIONS_PAGE}; "
        "infra/releases.py EMR_REGIONS)",
    ),
]
Account = Annotated[str, _matches(ACCOUNT_PATTERN, "12 digits or null")]
ReleaseLabel = Annotated[
    str,
    Allowed(
        lambda value: value in supported_labels(),
        f"a release label whose Spark is the job's {JOB_SPARK_VERSION}: "
        f"{', '.join(supported_labels())} (infra/releases.py)",
    ),
]
Ec2InstanceType = Annotated[
    str, _matches(EC2_INSTANCE_TYPE_PATTERN, "an EC2 instance type such as m5.xlarge")
]
SizedInstanceType = Annotated[
    str, Allowed(lambda value: value in INSTANCE_TYPES, ", ".join(sorted(INSTANCE_TYPES)))
]
TlsZipUri = Annotated[
    str,
    _matches(
        TLS_ZIP_URI_PATTERN,
        "s3://<bucket>/<key>.zip holding the PEM certificates for in-transit "
        "encryption (docs/infra.md)",
    ),
]
Email = Annotated[str, _matches(EMAIL_PATTERN, "an e-mail address")]
Sha256 = Annotated[
    str, _matches(SHA256_PATTERN, "64 lowercase hex digits (the sha256 cdk synth names), or null")
]
VpcId = Annotated[str, _matches(VPC_ID_PATTERN, "vpc-<hex> or null")]
SubnetId = Annotated[str, _matches(SUBNET_ID_PATTERN, "subnet-<hex>")]
Cidr = Annotated[str, _matches(CIDR_PATTERN, "an IPv4 CIDR /16../28")]
MskClusterArn = Annotated[
    str,
    _matches(
        MSK_CLUSTER_ARN_PATTERN,
        "arn:aws:kafka:<region>:<12-digit account>:cluster/<name>/<uuid>, or null",
    ),
]


class StreamConfig(ConfigModel):
    """``shard_count`` null means on-demand capacity (no shard planning)."""

    shard_count: int | None = Field(default=None, ge=1)
    retention_hours: int = Field(default=24, ge=24, le=MAX_RETENTION_HOURS)
    # The account's Kinesis shard quota in the instance's Region, when it is
    # above the default one (``make preflight`` prints it): the upper bound of
    # ``shard_count``. Null: the Region's default quota (default_shard_quota).
    shard_quota: PositiveInt | None = None

    @property
    def on_demand(self) -> bool:
        return self.shard_count is None


class EmrConfig(ConfigModel):
    release_label: ReleaseLabel = DEFAULT_RELEASE_LABEL
    master_instance_type: Ec2InstanceType = "m5.xlarge"
    master_instance_count: Annotated[int, Allowed(lambda n: n in (1, 3), "1 or 3")] = 1
    core_instance_type: SizedInstanceType = "m5.xlarge"
    core_instance_count: PositiveInt = 2
    # Cores per executor (None: infra/sizing.py's 4); ``size: small`` sets 2.
    executor_cores: PositiveInt | None = None
    # In-transit encryption needs a PEM zip (privateKey.pem, certificateChain.pem,
    # trustedCertificates.pem) that exists before the cluster starts; see docs/infra.md.
    # No default: every deployment names its own.
    tls_certificates_s3_uri: TlsZipUri
    # The job's interpreter on the nodes; None: the release's first listed
    # Python (infra/releases.py). emr-spark-8.1.0 lists 3.11 and 3.13 only.
    python: str | None = None
    # The delete-time function that revokes EMR's rules between the cluster's
    # managed groups (infra/constructs/sg_cleanup.py): a few EC2 calls; Lambda
    # allows at most 900 s.
    security_group_cleanup_timeout_sec: int = Field(
        default=120, ge=10, le=900, description="the cleanup Lambda's timeout"
    )

    @model_validator(mode="after")
    def _python_on_the_release(self) -> Self:
        if self.python is not None and self.python not in self.release.pythons:
            raise bad_value(
                self.python,
                f"a Python that {self.release_label} ships: {', '.join(self.release.pythons)}",
                "python",
            )
        return self

    @property
    def release(self) -> Release:
        return release_for(self.release_label)

    @property
    def applications(self) -> tuple[str, ...]:
        """What ``AWS::EMR::Cluster.Applications`` names for this release (infra/releases.py)."""
        return self.release.applications

    @property
    def job_python(self) -> str:
        """The interpreter the bootstrap installs for and the step runs the job on."""
        return self.python or self.release.pythons[0]

    @property
    def tls_is_placeholder(self) -> bool:
        return self.tls_certificates_bucket == PLACEHOLDER_TLS_BUCKET

    @property
    def tls_certificates_bucket(self) -> str:
        found = TLS_ZIP_URI_PATTERN.fullmatch(self.tls_certificates_s3_uri)
        return found["bucket"] if found else ""

    @property
    def tls_certificates_key(self) -> str:
        found = TLS_ZIP_URI_PATTERN.fullmatch(self.tls_certificates_s3_uri)
        return found["key"] if found else ""


class AlarmConfig(ConfigModel):
    """Thresholds of the delay alarms (docs/design.md, "Incidents": the 3-minute-late batch).

    The batch-duration alarm compares against the trigger interval itself, so it
    has no threshold of its own, only how many of how many periods must breach.
    """

    emails: JsonTuple[Email] = ()
    period_sec: Annotated[
        PositiveInt,
        Allowed(lambda s: s in (10, 30) or s % 60 == 0, "10, 30 or a multiple of 60"),
    ] = 60
    iterator_age_ms: PositiveInt = 60_000
    batch_duration_datapoints: PositiveInt = 3
    batch_duration_evaluation_periods: PositiveInt = 5
    end_to_end_latency_ms: PositiveInt = 120_000
    scheduling_delay_ratio: Annotated[
        float, Field(gt=0), Allowed(lambda r: r <= 1, "0 < ratio <= 1")
    ] = 0.5
    failure_records: PositiveInt = 100
    heartbeat_missing_periods: PositiveInt = 3
    # How many of how many periods must breach, per alarm (N of M; the batch
    # duration pair above also serves the scheduling-delay alarm). The lag
    # alarms wait for 3 periods in a row: one slow GetRecords is not a lag.
    lag_datapoints: PositiveInt = 3
    lag_evaluation_periods: PositiveInt = 3
    end_to_end_latency_datapoints: PositiveInt = 2
    end_to_end_latency_evaluation_periods: PositiveInt = 3
    # One period over the threshold is already a burst of bad records.
    failure_records_datapoints: PositiveInt = 1
    failure_records_evaluation_periods: PositiveInt = 1

    @model_validator(mode="after")
    def _datapoints_fit_the_window(self) -> Self:
        for alarm in ("batch_duration", "lag", "end_to_end_latency", "failure_records"):
            datapoints = getattr(self, f"{alarm}_datapoints")
            periods = getattr(self, f"{alarm}_evaluation_periods")
            if datapoints > periods:
                raise bad_value(
                    datapoints,
                    f"<= alarms.{alarm}_evaluation_periods ({periods})",
                    f"{alarm}_datapoints",
                )
        return self


# The retentions CloudWatch Logs accepts that an instance may choose (days).
LOG_RETENTION_DAYS: Final = (7, 14, 30, 60, 90, 180, 365)
LogRetentionDays = Annotated[
    int,
    Allowed(lambda d: d in LOG_RETENTION_DAYS, ", ".join(map(str, LOG_RETENTION_DAYS))),
]


class RetentionConfig(ConfigModel):
    """How long the instance keeps what it only keeps for looking back: the
    buckets' old object versions and logs, and its CloudWatch log groups.
    The table, the checkpoints and the stream's records are not here: they
    are data, kept until deleted (stream: ``stream.retention_hours``)."""

    # Overwritten or deleted objects stay recoverable this long (versioned buckets).
    noncurrent_version_days: PositiveInt = 30
    # Parts of an upload that never completed (a killed writer) are removed after this.
    incomplete_upload_days: PositiveInt = 7
    emr_log_days: PositiveInt = 30
    # The audit trail of the buckets (server access logs).
    access_log_days: PositiveInt = 90
    flow_log_days: LogRetentionDays = 90
    broker_log_days: LogRetentionDays = 30
    # The security-group cleanup function's logs and CDK's helper functions'.
    function_log_days: LogRetentionDays = 30


class NetworkConfig(ConfigModel):
    """An existing VPC is imported without lookups (synth stays offline), so its
    availability zones and private subnet ids are required alongside its id.
    Without ``vpc_id`` the stack creates a VPC from ``vpc_cidr``."""

    vpc_id: VpcId | None = None
    availability_zones: JsonTuple[str] = ()
    private_subnet_ids: JsonTuple[SubnetId] = ()
    vpc_cidr: Cidr = "10.0.0.0/16"
    nat_gateways: int = Field(default=1, ge=1, description="private egress")
    # The VPC of the Region's shared stack (``Streaming-shared-<region>``,
    # infra/shared_config.py), referenced from it: its ids are never copied
    # into cdk.json, and a shared-stack change that would replace the VPC or
    # its subnets is refused while an instance uses them (docs/infra.md).
    shared: bool = False

    @model_validator(mode="after")
    def _subnets_match_the_vpc(self) -> Self:
        zones, subnets = list(self.availability_zones), list(self.private_subnet_ids)
        if self.shared:
            for field, value in (
                ("vpc_id", self.vpc_id),
                ("availability_zones", zones),
                ("private_subnet_ids", subnets),
            ):
                if value:
                    raise bad_value(
                        value,
                        "null or empty when network.shared is true (the shared stack's own)",
                        field,
                    )
            return self
        if self.vpc_id is None:
            if len(zones) == 1:
                raise bad_value(
                    zones,
                    "empty (the created VPC uses the region's first 3 zones) or at least 2 zones",
                    "availability_zones",
                )
            if subnets:
                raise bad_value(subnets, "empty unless network.vpc_id is set", "private_subnet_ids")
        elif len(subnets) < 2:
            raise bad_value(
                subnets,
                "at least 2 private subnet ids in different AZs when network.vpc_id is set",
                "private_subnet_ids",
            )
        elif len(zones) != len(subnets):
            raise bad_value(
                zones,
                "one availability zone per private subnet id, in the same order",
                "availability_zones",
            )
        return self


class KafkaConfig(ConfigModel):
    """The failure topic, on ``cluster_arn`` or on a cluster the stack creates.

    ``version``, ``broker_*`` describe the created cluster and are ignored when
    ``cluster_arn`` is set (only their types are checked then).
    """

    cluster_arn: MskClusterArn | None = None
    version: str = DEFAULT_KAFKA_VERSION
    broker_instance_type: str = "kafka.m5.large"
    # The failure topic is the only copy of a failed record: 3 brokers in 3 AZs,
    # 3 replicas, and acks=all writes that need 2 of them in sync (one broker or
    # one AZ may be down; a write is never acknowledged by one replica alone).
    broker_count: PositiveInt = 3
    broker_volume_gib: PositiveInt = 100
    # The created cluster's CloudWatch metrics; above DEFAULT they bill as
    # custom metrics (infra/cost_lines.py). ``size`` sets DEFAULT or PER_BROKER.
    enhanced_monitoring: Literal["DEFAULT", "PER_BROKER", "PER_TOPIC_PER_BROKER"] = "PER_BROKER"
    topic_partitions: PositiveInt = 6
    topic_replication_factor: PositiveInt = 3
    topic_min_insync_replicas: PositiveInt = 2
    topic_retention_hours: PositiveInt = 168
    # THE failure-record size: the job's producer message.max.bytes and
    # batch.size, the topic's max.message.bytes (+ the record batch framing)
    # and the claim-check threshold all derive from it (model/failure_limits.py).
    max_message_bytes: MaxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES
    # The failure topic on the Region's shared cluster (``Streaming-shared-<region>``),
    # its ARN referenced from that stack. Needs ``network.shared`` too: the
    # brokers admit the shared VPC's CIDR only.
    shared: bool = False

    @model_validator(mode="after")
    def _created_cluster_can_hold_the_topic(self) -> Self:
        if self.topic_min_insync_replicas >= self.topic_replication_factor:
            raise bad_value(
                self.topic_min_insync_replicas,
                f"< kafka.topic_replication_factor ({self.topic_replication_factor}), or an "
                "acks=all write blocks as soon as one replica is down",
                "topic_min_insync_replicas",
            )
        if self.shared and self.cluster_arn is not None:
            raise bad_value(
                self.cluster_arn,
                "null when kafka.shared is true (the shared stack's cluster)",
                "cluster_arn",
            )
        if self.cluster_arn is not None or self.shared:
            return self
        if not _kafka_version_supported(self.version):
            raise bad_value(
                self.version,
                f"an MSK Kafka version >= 3.6 such as {DEFAULT_KAFKA_VERSION}",
                "version",
            )
        if self.version in KAFKA_END_OF_SUPPORT:
            raise bad_value(
                self.version,
                f"a version with no published end of support, such as {DEFAULT_KAFKA_VERSION}: "
                f"{self.version}'s ends {KAFKA_END_OF_SUPPORT[self.version]} and MSK phases out "
                f"new clusters on it ({MSK_VERSIONS_PAGE})",
                "version",
            )
        if MSK_BROKER_TYPE_PATTERN.fullmatch(self.broker_instance_type) is None:
            raise bad_value(
                self.broker_instance_type,
                "an MSK broker type such as kafka.m5.large",
                "broker_instance_type",
            )
        if self.broker_count < 2:
            raise bad_value(self.broker_count, "an integer >= 2", "broker_count")
        if self.topic_replication_factor > self.broker_count:
            raise bad_value(
                self.topic_replication_factor,
                f"<= kafka.broker_count ({self.broker_count})",
                "topic_replication_factor",
            )
        return self

    @property
    def min_insync_replicas(self) -> int:
        """Replicas an ``acks=all`` write needs in sync (validated < replication factor,
        so one replica may be down without blocking the producer)."""
        return self.topic_min_insync_replicas


class ExpectedLoadConfig(ConfigModel):
    """The load the instance is expected to carry. Only ``make cost`` reads it,
    for the lines that grow with volume (infra/cost_lines.py); nothing is sized from
    it. Zero: not declared, the volume lines are priced at nothing."""

    records_per_sec: float = Field(default=0, ge=0)
    record_bytes: PositiveInt = 1024


class DeployedConfig(ConfigModel):
    """What the instance's live stack was last deployed with, for the changes
    CloudFormation cannot apply to it (infra/deployed.py): synth is offline and
    cannot ask. Null (or no ``deployed`` section): not deployed, nothing is
    refused. Set each value after a deploy completes; ``make preflight``
    compares them with the deployed stack's template."""

    # The provisioned stream's ShardCount (null: on-demand, or not deployed).
    shard_count: PositiveInt | None = None
    # The failure topic's ReplicationFactor (null: not deployed).
    topic_replication_factor: PositiveInt | None = None
    # The job's spark.sql.shuffle.partitions when the instance was created:
    # the de-duplication state's partition count, which its checkpoint keeps
    # (InstanceConfig.shuffle_partitions; docs/sizing.md, "Executors and cores").
    shuffle_partitions: PositiveInt | None = None


class SupervisorConfig(ConfigModel):
    """The supervisor that restarts the instance's job (infra/supervisor/,
    docs/operate.md, "The supervisor"): its restart budget and waits.

    ``max_restarts_per_hour`` mirrors EMR Serverless streaming jobs'
    ``maxFailedAttemptsPerHour`` (default 5, 1-10,
    https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/streaming-jobs.html).
    The back-off doubles from ``backoff_sec`` per restart in the hour, up to
    ``backoff_max_sec``. ``start_grace_sec``: how long a restarted job may take
    to hold its lease (YARN's start plus ``job.lease_wait_sec``) before the
    supervisor counts it as not started. ``check_minutes``: the schedule
    (EventBridge rate expressions count whole minutes,
    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-rate-expressions.html).
    """

    enabled: bool = True
    max_restarts_per_hour: Annotated[int, Field(ge=1, le=10)] = 5
    backoff_sec: PositiveInt = 60
    backoff_max_sec: PositiveInt = 600
    start_grace_sec: PositiveInt = 600
    check_minutes: Annotated[int, Field(ge=1, le=60)] = 1

    @model_validator(mode="after")
    def _backoff_bounds(self) -> Self:
        if self.backoff_max_sec < self.backoff_sec:
            raise bad_value(
                self.backoff_max_sec,
                f">= supervisor.backoff_sec ({self.backoff_sec})",
                "backoff_max_sec",
            )
        return self


class TableSeed(JobSettings):
    """``table_seed``: the event schema an events table was created with. Only
    ``event_fields``, ``id_field`` and ``event_time_field`` may be given; they
    are checked as the job's own (JobSettings)."""

    @model_validator(mode="after")
    def _schema_keys_only(self) -> Self:
        extra = sorted(self.model_fields_set - set(SEED_KEYS))
        if extra:
            raise bad_value(extra[0], f"one of {', '.join(SEED_KEYS)}", extra[0])
        return self


SEED_KEYS: Final = ("event_fields", "id_field", "event_time_field")


class InstanceConfig(ConfigModel):
    """One domain in one region; everything its stack needs, validated.

    ``job`` is the job's own :class:`model.config.JobSettings` (its options,
    bounds and defaults), so an instance that omits a field gets exactly what
    the job would assume.
    """

    domain: Domain
    region: Region
    account: Account | None = None
    # Consistent defaults for a domain's volume (infra/sizes.py); explicit fields win.
    size: SizeName | None = None
    removal_policy: RemovalPolicyName = "RETAIN"
    termination_protection: bool = False
    stream: StreamConfig = Field(default_factory=StreamConfig)
    emr: EmrConfig
    job: JobSettings = Field(default_factory=JobSettings)
    alarms: AlarmConfig = Field(default_factory=AlarmConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    kafka: KafkaConfig = Field(default_factory=KafkaConfig)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    expected_load: ExpectedLoadConfig = Field(default_factory=ExpectedLoadConfig)
    supervisor: SupervisorConfig = Field(default_factory=SupervisorConfig)
    # Where the job runs, and the EMR Serverless shape (infra/serverless_config.py).
    compute: ComputeName = "emr"
    serverless: ServerlessConfig = Field(default_factory=ServerlessConfig)
    # Accounts where Lake Formation governs the Glue Data Catalog: grant the
    # job role and the table optimizer roles their table and database
    # permissions through Lake Formation too (``make preflight`` detects such
    # an account and says to turn this on).
    lake_formation_permissions: bool = False
    # The definition its events table was created with (its SHA-256,
    # infra/table_definition.py): synth refuses a table whose definition
    # differs, since CloudFormation would update the live table. Null: the
    # table of the default event schema (DEPLOYED_DEFINITION_SHA256). An
    # instance with its own job.event_fields pins its own; synth names the
    # value (docs/infra.md, "Event schema").
    table_definition_sha256: Sha256 | None = None
    # The event schema its events table was created with (the seed of its
    # CloudFormation definition, which the pin above covers), when
    # job.event_fields has grown since: synth lets additive changes through
    # (infra/schema_change.py) and the new job evolves the live table. Null:
    # the table was created with job.event_fields as declared (with a pin), or
    # with the default event schema (without one).
    table_seed: TableSeed | None = None
    # What the live stack holds (DeployedConfig); synth refuses a change
    # CloudFormation cannot apply to it (docs/infra.md, "Changes synth refuses").
    deployed: DeployedConfig = Field(default_factory=DeployedConfig)

    @model_validator(mode="before")
    @classmethod
    def _size_defaults_under_the_declaration(cls, data: Any) -> Any:
        """A known ``size`` is merged under what the instance states, so an
        explicit field still wins; an unknown one is left for the field's
        own check to name."""
        if isinstance(data, Mapping) and data.get("size") in SIZES:
            return _deep_merge(SIZES[str(data["size"])], data)
        return data

    @model_validator(mode="before")
    @classmethod
    def _emr_section_may_be_omitted(cls, data: Any) -> Any:
        """Every other emr field has a default; an instance without an ``emr``
        section must still fail on the one that has none, by its name."""
        if isinstance(data, Mapping) and "emr" not in data:
            return {**data, "emr": {}}
        return data

    @model_validator(mode="after")
    def _changes_cloudformation_can_apply(self) -> Self:
        """Refuse, at synth, an update CloudFormation would fail minutes into
        the deploy: a shard count beyond one UpdateShardCount call of the
        deployed one, a failure-topic replication factor other than the
        deployed one (infra/deployed.py says why and the way through)."""
        deployed = self.deployed
        wanted_shards = self.stream.shard_count
        if deployed.shard_count is not None and wanted_shards is not None:
            problem = shard_count_problem(deployed.shard_count, wanted_shards)
            if problem is not None:
                raise bad_value(wanted_shards, problem, "stream", "shard_count")
        if deployed.topic_replication_factor is not None:
            problem = replication_factor_problem(
                deployed.topic_replication_factor,
                self.kafka.topic_replication_factor,
                self.failure_topic_name,
            )
            if problem is not None:
                raise bad_value(
                    self.kafka.topic_replication_factor,
                    problem,
                    "kafka",
                    "topic_replication_factor",
                )
        return self

    @model_validator(mode="after")
    def _cross_section_rules(self) -> Self:
        release = self.emr.release
        if self.region not in release.regions:
            raise bad_value(
                self.region,
                f"a Region {release.label} exists in: {', '.join(release.regions)} "
                "(infra/releases.py)",
                "region",
            )
        bound = self.stream.shard_quota or default_shard_quota(self.region)
        shards = self.stream.shard_count
        if shards is not None and shards > bound:
            quota = (
                "stream.shard_quota"
                if self.stream.shard_quota
                else f"the default Kinesis shard quota of {self.region} ({KINESIS_QUOTAS_PAGE})"
            )
            raise bad_value(
                shards,
                f"1..{bound}: {quota}; an account with a higher quota sets stream.shard_quota "
                "to it (make preflight prints it)",
                "stream",
                "shard_count",
            )
        if self.kafka.shared and not self.network.shared:
            raise bad_value(
                True,
                "false unless network.shared is true too: the shared cluster's brokers admit "
                "only the shared VPC's CIDR",
                "kafka",
                "shared",
            )
        arn = self.kafka.cluster_arn
        if arn is not None:
            found = MSK_CLUSTER_ARN_PATTERN.fullmatch(arn)
            if found is not None and found["region"] != self.region:
                raise bad_value(
                    arn,
                    f"a cluster in the instance's region {self.region} (topics are regional)",
                    "kafka",
                    "cluster_arn",
                )
            if f":cluster/{shared_cluster_name(self.region)}/" in arn:
                raise bad_value(
                    arn,
                    "kafka.shared and network.shared true instead of the shared cluster's ARN "
                    "copied as a literal: the instance then references the shared stack, which "
                    "can no longer replace the cluster under it",
                    "kafka",
                    "cluster_arn",
                )
            return self
        if not self.kafka.shared and not self.network.shared:
            check_broker_count(self.kafka.broker_count, self.network, "the created MSK cluster")
        return self

    @property
    def shuffle_partitions(self) -> int:
        """The job's ``spark.sql.shuffle.partitions``: one per executor core of
        the instance's sizing when it is created, then the count it was
        created with (``deployed.shuffle_partitions``), whatever the size.

        The de-duplication state is split into that many partitions and the
        checkpoint records the count: Structured Streaming does not let a
        restarted query change it ("Several configurations are not modifiable
        after the query has run": the Structured Streaming Programming Guide,
        https://spark.apache.org/docs/latest/streaming/additional-information.html,
        "Miscellaneous Notes"), so a new ``size`` changes the executors and
        keeps the partitions."""
        if self.deployed.shuffle_partitions is not None:
            return self.deployed.shuffle_partitions
        if self.compute == "serverless":  # one per core of the fixed executors
            return self.serverless.executor_count * self.serverless.executor.cpu
        emr = self.emr
        return size_executors(
            emr.core_instance_type, emr.core_instance_count, emr.executor_cores
        ).shuffle_partitions

    @property
    def creates_vpc(self) -> bool:
        """Whether the instance's stack creates its own VPC."""
        return self.network.vpc_id is None and not self.network.shared

    @property
    def creates_cluster(self) -> bool:
        """Whether the instance's stack creates its own MSK cluster."""
        return self.kafka.cluster_arn is None and not self.kafka.shared

    @property
    def instance_id(self) -> str:
        return contract.instance_id(self.domain, self.region)

    def seed_schema(self) -> EventSchemaDeclaration:
        """The event schema the instance's events table was created with
        (:attr:`table_seed`; see its comment for the defaults)."""
        if self.table_seed is not None:
            source: JobSettings = self.table_seed
        elif self.table_definition_sha256 is not None:
            # The pin is the fingerprint of the seed: the declared fields less
            # the optional ones added since (infra/table_definition.py).
            job = self.job
            grown_from = pinned_seed_fields(
                job.event_fields, self.table_definition_sha256, self.database_name
            )
            return EventSchemaDeclaration(
                tuple(job.event_fields if grown_from is None else grown_from),
                job.id_field,
                job.event_time_field,
            )
        else:
            source = JobSettings()
        seed = EventSchemaDeclaration(
            tuple(source.event_fields), source.id_field, source.event_time_field
        )
        declared = self.declared_schema()
        if self.table_seed is None and not is_additive(seed, declared):
            # Unpinned, and not a growth of the default schema: a new table of
            # its own schema, which the definition pin then asks to pin.
            return declared
        return seed

    def declared_schema(self) -> EventSchemaDeclaration:
        """The event schema the job runs with (``job.event_fields``)."""
        job = self.job
        return EventSchemaDeclaration(tuple(job.event_fields), job.id_field, job.event_time_field)

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

    @model_validator(mode="before")
    @classmethod
    def _serverless_needs_no_tls_zip(cls, data: Any) -> Any:
        """``"compute": "serverless"`` runs no cluster: its ``emr`` section is
        not used, so a missing (or the example's placeholder) TLS zip is not
        asked for (infra/serverless_config.py)."""
        if not isinstance(data, Mapping) or data.get("compute") != "serverless":
            return data
        serverless_problem(data)  # the limits of the job run (infra/serverless_config.py)
        emr = data.get("emr")
        emr = dict(emr) if isinstance(emr, Mapping) else {}
        if emr.get("tls_certificates_s3_uri") in (None, PLACEHOLDER_TLS_URI):
            emr["tls_certificates_s3_uri"] = NO_TLS_ON_SERVERLESS
        return {**data, "emr": emr}


def shared_cluster_name(region: str) -> str:
    """The MSK cluster of ``region``'s shared stack (infra/shared_config.py)."""
    return f"{contract.STACK_PREFIX.lower()}-failures-{region}"


def default_shard_quota(region: str) -> int:
    """The default Kinesis shard quota of an account in ``region`` (see
    :data:`KINESIS_DEFAULT_SHARDS`)."""
    if region in KINESIS_LARGE_QUOTA_REGIONS:
        return KINESIS_LARGE_DEFAULT_SHARDS
    return KINESIS_DEFAULT_SHARDS


def placeholder_tls_uri(instance_id: str) -> str:
    """The example's TLS zip of one instance (the key ``make certs`` uploads to)."""
    return f"s3://{PLACEHOLDER_TLS_BUCKET}/tls/{instance_id}/certificates.zip"


def msk_client_subnets(network: NetworkConfig) -> int:
    """How many private subnets a created MSK cluster spans (MSK takes 2 or 3).
    A created VPC without listed zones spans the region's first 3 (``Fn::GetAZs``)."""
    if network.vpc_id is None:
        zones = len(network.availability_zones) or CREATED_VPC_ZONES
        return min(3, zones)
    return min(3, len(network.private_subnet_ids))


def check_broker_count(broker_count: int, network: NetworkConfig, cluster: str) -> None:
    """MSK spreads a cluster's brokers evenly over its client subnets: refuse a
    ``kafka.broker_count`` that is not a multiple of them (``cluster`` names
    the cluster in the message)."""
    subnets = msk_client_subnets(network)
    if broker_count % subnets:
        raise bad_value(
            broker_count,
            f"a multiple of the {subnets} client subnets {cluster} spans",
            "kafka",
            "broker_count",
        )


# --------------------------------------------------------------------------- loading


def read_cdk_context(path: str | Path) -> Mapping[str, Any]:
    """The ``context`` object of a ``cdk.json`` (for callers outside the CDK app,
    e.g. the local run, which must see the same instances)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    context = raw.get("context", {}) if isinstance(raw, dict) else {}
    if not isinstance(context, dict):
        raise InstanceConfigError(f"{path}: 'context' must be an object")
    return context


class UndeclaredInstanceError(InstanceConfigError):
    """``cdk.json`` declares no instance of that id; ``declared`` are the ids it has."""

    def __init__(self, instance_id: str, path: str | Path, declared: Sequence[str]) -> None:
        super().__init__(
            f"{instance_id!r}: not declared in {path}; declared: {', '.join(declared)}"
        )
        self.declared = tuple(declared)


def declared_instance(path: str | Path, instance_id: str) -> InstanceConfig:
    """The instance ``path`` (a ``cdk.json``) declares as ``instance_id``, parsed
    as ``cdk synth`` parses it: what the operator commands and the producer
    look up by ``--instance``. Raises :class:`UndeclaredInstanceError` when there
    is none, :class:`InstanceConfigError` (or ``OSError``/``ValueError``) when
    the file cannot be read as a declaration."""
    declared = load_instances(read_cdk_context(path))
    for config in declared:
        if config.instance_id == instance_id:
            return config
    raise UndeclaredInstanceError(instance_id, path, [c.instance_id for c in declared])


def load_instances(context: Mapping[str, Any]) -> list[InstanceConfig]:
    """Parse every instance declared under ``context["streaming"]``.

    Raises :class:`InstanceConfigError` for the first invalid instance, one
    line per bad field of it.
    """
    section = context.get(CONTEXT_KEY)
    if not isinstance(section, Mapping):
        raise InstanceConfigError(
            f"context.{CONTEXT_KEY}: missing or not an object; expected "
            '{"defaults": {...}, "instances": [{"domain": ..., "region": ...}, ...]}'
        )
    # ``shared``: a region's shared stack (infra/shared_config.py).
    unknown = sorted(set(section) - {"defaults", "instances", "shared"})
    if unknown:
        raise InstanceConfigError(
            f"context.{CONTEXT_KEY}.{unknown[0]}: unknown field; allowed: defaults, instances, "
            "shared"
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
        config = validated(InstanceConfig, merged, f"instance {name}", "<instance>")
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
    refuse_shared_tls(instances)
    return instances


def runs_an_emr_cluster(config: InstanceConfig) -> bool:
    """Whether the instance's job runs on an EMR cluster of its own, the only
    compute that loads ``emr.tls_certificates_s3_uri`` (an instance without a
    cluster neither needs nor reads a TLS zip)."""
    return getattr(config, "compute", "emr") == "emr"


def refuse_shared_tls(instances: Sequence[InstanceConfig]) -> None:
    """Refuse one TLS zip for two instances with an EMR cluster: it holds a
    private key, which each instance's job role can then read, and one
    certificate's expiry or renewal then reaches every instance at once.
    ``make certs INSTANCE=...`` makes one zip per instance."""
    users: dict[str, list[str]] = {}
    for config in instances:
        if runs_an_emr_cluster(config):
            users.setdefault(config.emr.tls_certificates_s3_uri, []).append(config.instance_id)
    lines = [
        f"instance {other}: field emr.tls_certificates_s3_uri: bad value {uri!r}, already "
        f"{ids[0]}'s; allowed: a zip of its own, `make certs INSTANCE={other}` "
        '(docs/infra.md, "TLS certificates")'
        for uri, ids in users.items()
        for other in ids[1:]
    ]
    if lines:
        raise InstanceConfigError("\n".join(lines))


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
