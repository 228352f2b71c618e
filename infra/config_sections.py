"""The sections of an instance's configuration (``stream``, ``emr``,
``alarms``, ``retention``, ``network``, ``kafka``, ``expected_load``,
``deployed``, ``supervisor``, ``table_seed``): one pydantic model each, with
its defaults, bounds and the rules that need only the section itself. The
instance (:class:`infra.config.InstanceConfig`) holds them and checks the rules
that span sections.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, Self

from pydantic import Field, PositiveInt, model_validator

from emr.releases import DEFAULT_RELEASE_LABEL, Release, release_for
from infra.config_fields import (
    MSK_BROKER_TYPE_PATTERN,
    TLS_ZIP_URI_PATTERN,
    Cidr,
    Ec2InstanceType,
    Email,
    MskClusterArn,
    ReleaseLabel,
    SizedInstanceType,
    SubnetId,
    TlsZipUri,
    VpcId,
    kafka_version_supported,
)
from model import contract
from model.config import JobSettings, MaxMessageBytes
from model.config_kit import Allowed, ConfigModel, JsonTuple, at_least, bad_value
from model.failure_limits import DEFAULT_MAX_MESSAGE_BYTES

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
MAX_RETENTION_HOURS: Final = 8760  # Kinesis allows 24 h .. 365 days


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
    # Python (emr/releases.py). emr-spark-8.1.0 lists 3.11 and 3.13 only.
    python: str | None = None
    # The delete-time function that revokes EMR's rules between the cluster's
    # managed groups (infra/sg_cleanup/construct.py): a few EC2 calls; Lambda
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
        """What ``AWS::EMR::Cluster.Applications`` names for this release (emr/releases.py)."""
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
    # custom metrics (infra/cost/lines.py). ``size`` sets DEFAULT or PER_BROKER.
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
        if not kafka_version_supported(self.version):
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
    """The load the instance is expected to carry: ``make cost`` prices the
    lines that grow with volume from it (infra/cost/lines.py), and synth checks
    the shape against what it needs (infra/advice.py). Zero: not declared, the
    volume lines are priced at nothing and no shape is advised.

    ``headroom``: how many times the usual rate the shape must hold (a hot
    hour, the drain after an outage; docs/sizing.md uses 2). A shape below
    the need is refused unless ``accept_undersized`` is true with a
    ``reason`` (a test instance, a load that will not grow)."""

    records_per_sec: float = Field(default=0, ge=0)
    record_bytes: PositiveInt = 1024
    headroom: float = Field(default=2.0, ge=1, le=100)
    accept_undersized: bool = False
    reason: str | None = None

    @model_validator(mode="after")
    def _a_reason_to_accept(self) -> Self:
        if self.accept_undersized and self.reason is None:
            raise bad_value(
                None, "a sentence saying why the instance may run below its need", "reason"
            )
        return self


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
        floor = f"supervisor.backoff_sec ({self.backoff_sec})"
        at_least("backoff_max_sec", self.backoff_max_sec, self.backoff_sec, floor)
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


def shared_cluster_name(region: str) -> str:
    """The MSK cluster of ``region``'s shared stack (infra/shared_config.py)."""
    return f"{contract.STACK_PREFIX.lower()}-failures-{region}"


def default_shard_quota(region: str) -> int:
    """The default Kinesis shard quota of an account in ``region`` (see
    :data:`KINESIS_DEFAULT_SHARDS`)."""
    if region in KINESIS_LARGE_QUOTA_REGIONS:
        return KINESIS_LARGE_DEFAULT_SHARDS
    return KINESIS_DEFAULT_SHARDS


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
