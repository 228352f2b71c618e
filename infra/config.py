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

Here: the instance (:class:`InstanceConfig`, with the rules that span its
sections) and the reading of ``cdk.json``. Each section's model is in
:mod:`infra.config_sections`, the field types they share in
:mod:`infra.config_fields`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, Self, TypeVar, get_args

from pydantic import BaseModel, Field, PositiveInt, ValidationError, model_validator

from infra.advice import FIXED_SEC, demand_of, shape_of, verdict
from infra.config_fields import MSK_CLUSTER_ARN_PATTERN, Account, Domain, Region, Sha256
from infra.config_sections import (
    KINESIS_QUOTAS_PAGE,
    PLACEHOLDER_TLS_BUCKET,
    AlarmConfig,
    DeployedConfig,
    EmrConfig,
    ExpectedLoadConfig,
    KafkaConfig,
    NetworkConfig,
    RetentionConfig,
    StreamConfig,
    SupervisorConfig,
    TableSeed,
    check_broker_count,
    default_shard_quota,
    shared_cluster_name,
)
from infra.deployed import replication_factor_problem, shard_count_problem
from infra.schema_change import EventSchemaDeclaration, is_additive
from infra.serverless.config import (
    NO_TLS_ON_SERVERLESS,
    ComputeName,
    ServerlessConfig,
    serverless_problem,
)
from infra.sizing import SIZES, STATE_PARTITIONS, SizeName, size_executors
from infra.table_definition import (
    DEPLOYED_DEFINITION_SHA256,
    database_prefix,
    definition_fingerprint,
    pinned_seed_fields,
)
from model import contract
from model.config import JobSettings
from model.config_kit import ConfigModel, bad_value, problems

CONTEXT_KEY: Final = "streaming"

RemovalPolicyName = Literal["RETAIN", "DESTROY"]

PLACEHOLDER_TLS_URI: Final = f"s3://{PLACEHOLDER_TLS_BUCKET}/streaming/certificates.zip"
SYNTH_CHECK_CONTEXT_KEY: Final = "streaming:synth-check"
# ``-c streaming:instances=orders-eu-west-1,...``: synthesize (and so deploy)
# only these instances and the shared stacks they use; the placeholder refusal
# looks at them only (infra/stacks/application.py, docs/deploy.md "First deploy").
SELECTION_CONTEXT_KEY: Final = "streaming:instances"


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


class InstanceConfig(ConfigModel):
    """One domain in one region; everything its stack needs, validated.

    ``job`` is the job's own :class:`model.config.JobSettings` (its options,
    bounds and defaults), so an instance that omits a field gets exactly what
    the job would assume.
    """

    domain: Domain
    region: Region
    account: Account | None = None
    # Consistent defaults for a domain's volume (infra/sizing.py); explicit fields win.
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
    # The de-duplication state's partitions (the job's
    # spark.sql.shuffle.partitions) for a NEW checkpoint; null: the size's
    # (infra/sizing.py STATE_PARTITIONS), else one per executor core. A deployed
    # instance keeps deployed.shuffle_partitions (docs/sizing.md, "Executors and cores").
    state_partitions: PositiveInt | None = None
    # Where the job runs, and the EMR Serverless shape (infra/serverless/config.py).
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
    def _known_compute_first(cls, data: Any) -> Any:
        """An unknown ``compute`` is the root error: reported alone, before the
        fields an EMR cluster would require (a mistyped "serverless" would
        otherwise first ask for ``emr.tls_certificates_s3_uri``)."""
        if isinstance(data, Mapping) and "compute" in data:
            value = data["compute"]
            if value not in get_args(ComputeName):
                raise bad_value(value, " | ".join(get_args(ComputeName)), "compute")
        return data

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
    def _latency_alarm_above_the_trigger(self) -> Self:
        """A record waits up to one trigger interval for its batch to start,
        then the batch's fixed cost F (docs/sizing.md, "The model"): an
        end-to-end latency alarm at or below I + F fires on a healthy job,
        so a longer trigger must come with an alarm it can meet."""
        floor = self.job.trigger_interval_sec + FIXED_SEC[self.compute]
        threshold = self.alarms.end_to_end_latency_ms
        if threshold <= floor * 1000:
            raise bad_value(
                threshold,
                f"above {floor * 1000:,.0f} ms: job.trigger_interval_sec "
                f"({self.job.trigger_interval_sec} s) plus the {FIXED_SEC[self.compute]:g} s "
                f"fixed cost of a {self.compute} batch, which every record may wait; "
                "raise the alarm or shorten the trigger",
                "alarms",
                "end_to_end_latency_ms",
            )
        return self

    @model_validator(mode="after")
    def _state_partitions_of_a_new_checkpoint(self) -> Self:
        """``state_partitions`` applies to a new checkpoint only: a deployed
        one keeps the count it was created with, and Spark refuses a restarted
        stateful query another one, so a differing value is refused here
        rather than ignored."""
        wanted, kept = self.state_partitions, self.deployed.shuffle_partitions
        if wanted is not None and kept is not None and wanted != kept:
            raise bad_value(
                wanted,
                f"{kept} (deployed.shuffle_partitions: the checkpoint keeps the count it was "
                "created with); another count needs a new checkpoint: make stop-job, make "
                "migrate-checkpoint, then set deployed.shuffle_partitions to it",
                "state_partitions",
            )
        return self

    @model_validator(mode="after")
    def _cross_section_rules(self) -> Self:
        release = self.emr.release
        if self.region not in release.regions:
            raise bad_value(
                self.region,
                f"a Region {release.label} exists in: {', '.join(release.regions)} "
                "(emr/releases.py)",
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

    @model_validator(mode="after")
    def _shape_holds_the_declared_load(self) -> Self:
        """A shape below what ``expected_load`` needs by docs/sizing.md's model
        is refused, with the advised shape (infra/advice.py), unless the
        instance accepts it with a reason; an oversized one is only a warning,
        printed at synth (infra/cost/estimate.py)."""
        demand = demand_of(self)
        if demand is None or self.expected_load.accept_undersized:
            return self
        found = verdict(demand, shape_of(self), self.region)
        if found is not None and found.kind == "under":
            raise bad_value(
                self.expected_load.records_per_sec,
                f"a shape that holds it x{demand.headroom:g} headroom ({found.what}): "
                f"{found.advice}; or expected_load.accept_undersized with a reason",
                "expected_load",
                "records_per_sec",
            )
        return self

    @model_validator(mode="after")
    def _own_fields_are_pinned(self) -> Self:
        """An instance whose events table would be built from fields of its own
        and states no pin: name the pin, in one line, before any construct
        exists. Synth cannot tell a table not deployed yet from a deployed one,
        so the line says both ways (the construct's check,
        infra/table_definition.py, still guards a pin that no longer matches)."""
        if self.table_definition_sha256 is not None or self.table_seed is not None:
            return self
        fields = self.seed_schema().fields
        name = self.database_name
        found = definition_fingerprint(fields, name, database_prefix(name))
        if found != DEPLOYED_DEFINITION_SHA256:
            raise bad_value(
                None,
                f'"{found}" (events table {name}.{contract.EVENTS_TABLE} from its own '
                "job.event_fields): add it to the instance's cdk.json entry if that table is "
                'not deployed yet; a deployed one: docs/infra.md, "Changing the events table"',
                "table_definition_sha256",
            )
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
        chosen = self.state_partitions or (STATE_PARTITIONS[self.size] if self.size else None)
        if chosen is not None:
            return chosen
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
        asked for (infra/serverless/config.py)."""
        if not isinstance(data, Mapping) or data.get("compute") != "serverless":
            return data
        serverless_problem(data)  # the limits of the job run (infra/serverless/config.py)
        emr = data.get("emr")
        emr = dict(emr) if isinstance(emr, Mapping) else {}
        if emr.get("tls_certificates_s3_uri") in (None, PLACEHOLDER_TLS_URI):
            emr["tls_certificates_s3_uri"] = NO_TLS_ON_SERVERLESS
        return {**data, "emr": emr}


def placeholder_tls_uri(instance_id: str) -> str:
    """The example's TLS zip of one instance (the key ``make certs`` uploads to)."""
    return f"s3://{PLACEHOLDER_TLS_BUCKET}/tls/{instance_id}/certificates.zip"


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
