"""One instance, one stack: it instantiates the constructs, wires them and
calls their grant methods. Everything an instance owns lives here and nowhere
else, so deploying, breaking or deleting one instance cannot touch another
(docs/design.md, "Incidents": six domains on one database).

The stack only wires. Each construct's props read what they need from the
instance (``<Construct>Props.of``), each construct derives its own names and
locations (the buckets the job's URIs, the network the MSK subnets) and
declares its own stack outputs (infra/constructs/instance.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import CfnOutput, Stack, Tags
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.config import InstanceConfig
from infra.constructs.alarms import Alarms, AlarmsProps
from infra.constructs.buckets import Buckets, BucketsProps
from infra.constructs.catalog import CatalogDatabase, CatalogDatabaseProps
from infra.constructs.emr_cluster import EmrCluster, EmrClusterProps
from infra.constructs.failure_topic import FailureTopic, FailureTopicProps
from infra.constructs.instance import removal_policy
from infra.constructs.job_deployment import JobDeployment, JobDeploymentProps
from infra.constructs.network import Network, NetworkProps
from infra.constructs.roles import Roles, RolesProps
from infra.constructs.stream import EventStream, EventStreamProps
from infra.emr_step import STEP_SPEC_OUTPUT, build_step
from infra.job_config import job_config_for
from infra.serverless.app import ServerlessJob, ServerlessJobProps
from infra.supervisor.construct import (
    EmrStepTarget,
    ServerlessRunTarget,
    Supervisor,
    SupervisorProps,
    policy_for,
    serverless_policy_for,
)
from infra.supervisor.decision import Policy

INSTANCE_TAG = "streaming:instance"


@dataclass(frozen=True)
class _Parts:
    """What both kinds of compute wire to: made once, before the job's compute."""

    config: InstanceConfig
    network: Network
    stream: EventStream
    buckets: Buckets
    failures: FailureTopic
    catalog: CatalogDatabase

    def grant_job(self, role: iam.IRole, alarms: Alarms) -> None:
        """Everything the job may touch, each scoped to this instance: one set
        of grants for the EMR job role and the serverless execution role."""
        self.stream.grant_job(role, consumer_type=self.config.job.source.consumer_type)
        for owner in (self.buckets, self.catalog, self.failures, alarms):
            owner.grant_job(role)


class StreamingStack(Stack):
    """Exposes ``config``, the constructs it wires (``buckets``, ``emr``,
    ``alarms``, ``job``) and ``job_config`` (what the job runs with)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: InstanceConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            stack_name=config.stack_name,
            description=(
                f"Streaming instance {config.instance_id}: Kinesis to Spark on "
                + ("EMR Serverless" if config.compute == "serverless" else "EMR")
            ),
            termination_protection=config.termination_protection,
            **kwargs,
        )
        self.config = config
        Tags.of(self).add(INSTANCE_TAG, config.instance_id)
        network = Network(self, "Network", props=NetworkProps.of(config))
        stream = EventStream(self, "Events", props=EventStreamProps.of(config))
        self.buckets = buckets = Buckets(self, "Buckets", props=BucketsProps.of(config))
        failures = FailureTopic(
            self, "Failures", props=FailureTopicProps.of(config, network.vpc, network.msk_subnets)
        )
        self.job_config = job_config_for(
            config,
            checkpoint_location=buckets.checkpoint_location,
            kafka_cluster_arn=failures.cluster_arn,
            kafka_security=failures.client_security,
            database_location=buckets.database_location(config.database_name),
            stop_marker_path=buckets.stop_marker_path,
            failure_store_location=buckets.failure_store_location,
            efo_consumer_arn=stream.consumer_arn,
        )
        failures.check_producer(self.job_config.kafka, instance_id=config.instance_id)
        catalog = CatalogDatabase(
            self, "Catalog", props=CatalogDatabaseProps.of(config, self.job_config, buckets)
        )
        self.emr: EmrCluster | None = None
        self.serverless: ServerlessJob | None = None
        self.supervisor: Supervisor | None = None
        parts = _Parts(config, network, stream, buckets, failures, catalog)
        if config.compute == "serverless":
            self._serverless(parts)
        else:
            self._emr(parts)

    def _emr(
        self,
        parts: _Parts,
    ) -> None:
        """The job on the instance's own EMR cluster, started by an EMR step."""
        roles = Roles(self, "Roles", props=RolesProps(parts.config.instance_id))
        self.emr = emr = EmrCluster(
            self,
            "Emr",
            props=EmrClusterProps.of(
                parts.config,
                parts.network,
                roles,
                log_uri=parts.buckets.emr_log_uri,
                # On DESTROY it is gone before the buckets are emptied.
                depends_on=tuple(parts.buckets.emptied_on_delete),
            ),
        )
        parts.failures.allow_clients(emr.client_groups)
        self.alarms = alarms = Alarms(
            self, "Alarms", props=AlarmsProps.of(parts.config, parts.stream.stream, emr.cluster.ref)
        )
        # What the nodes need to boot, in the job role's boot policy (the
        # cluster grants its disk key and TLS certificates there itself).
        parts.buckets.grant_boot(roles.boot)
        # Everything the job may touch, each scoped to this instance.
        parts.grant_job(roles.job_role, alarms)
        # The nodes boot as soon as the cluster exists: it waits for every policy
        # of its two roles, which it names only (docs/infra.md, "Creation order").
        emr.cluster.node.add_dependency(*roles.policies)
        self.job = JobDeployment(
            self,
            "Job",
            props=JobDeploymentProps.of(parts.config, parts.buckets.artifacts, self.job_config),
        )
        # The step starts the job at once: it waits for what the job uses that
        # it does not reference (the table and the topic are named by literals
        # in the job's config) and for the job role's permissions.
        self.job.attach(
            emr.cluster, after=(*roles.job_policies, *parts.catalog.job_needs, parts.failures.topic)
        )
        # Restarts the job with the same step when it is down, within a budget.
        if parts.config.supervisor.enabled:
            spec = self.job.step_spec
            self._supervise(
                parts,
                alarms,
                EmrStepTarget(cluster_id=emr.cluster.ref, step=build_step(spec)),
                policy_for(parts.config, spec.stop_timeout_sec),
            )

    def _serverless(
        self,
        parts: _Parts,
    ) -> None:
        """The job as a STREAMING run on an EMR Serverless application of its
        own (docs/serverless.md): the same job package, the same grants, the
        same alarms, dashboard and supervisor policy as on EMR."""
        self.job = JobDeployment(
            self,
            "Job",
            props=JobDeploymentProps.of(parts.config, parts.buckets.artifacts, self.job_config),
        )
        self.serverless = job = ServerlessJob(
            self,
            "Serverless",
            props=ServerlessJobProps(
                instance=parts.config,
                job_config=self.job_config,
                vpc=parts.network.vpc,
                subnets=tuple(parts.network.private_subnets),
                artifacts_bucket=parts.buckets.artifacts,
                data_bucket=parts.buckets.data,
                job=self.job,
                removal_policy=removal_policy(parts.config),
            ),
        )
        parts.failures.allow_clients([job.security_group])
        # make status finds the deployed job config through this output, as on EMR
        # (scripts/status/target.py); make redeploy refuses: there is no cluster.
        spec_output = CfnOutput(
            self.job,
            STEP_SPEC_OUTPUT,
            value=self.to_json_string(self.job.step_spec.to_dict()),
            description="The job's package and config (make status reads its config_uri)",
        )
        spec_output.override_logical_id(STEP_SPEC_OUTPUT)
        self.alarms = alarms = Alarms(
            self,
            "Alarms",
            props=AlarmsProps.of(parts.config, parts.stream.stream, job.application_id),
        )
        # Everything the job may touch, each scoped to this instance: the
        # same grant_job calls as the EMR job role's.
        role = job.execution_role
        parts.grant_job(role, alarms)
        policy = role.node.try_find_child("DefaultPolicy")
        job.start(
            after=(
                *([policy] if isinstance(policy, iam.Policy) else []),
                *parts.catalog.job_needs,
                parts.failures.topic,
                *parts.network.egress_ready,
            )
        )
        if parts.config.supervisor.enabled:
            self._supervise(
                parts,
                alarms,
                ServerlessRunTarget(job.application_id, job.request),
                serverless_policy_for(parts.config, job.stop_timeout_sec),
            )

    def _supervise(
        self,
        parts: _Parts,
        alarms: Alarms,
        target: EmrStepTarget | ServerlessRunTarget,
        policy: Policy,
    ) -> None:
        """Restarts the job with ``target`` when it is down, within the budget."""
        self.supervisor = Supervisor(
            self,
            "Supervisor",
            props=SupervisorProps(
                instance=parts.config,
                job_config=self.job_config,
                data_bucket=parts.buckets.data,
                target=target,
                policy=policy,
                alarm_topic=alarms.topic.topic,
                removal_policy=removal_policy(parts.config),
            ),
        )
