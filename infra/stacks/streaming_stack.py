"""One instance, one stack: it instantiates the constructs, wires them and
calls their grant methods. Everything an instance owns lives here and nowhere
else, so deploying, breaking or deleting one instance cannot touch another
(docs/design.md, "Incidents": six domains on one database)."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, RemovalPolicy, Stack, Tags
from constructs import Construct

from app.failure_limits import check_limits
from infra.config import InstanceConfig, msk_client_subnets
from infra.constructs.alarms import Alarms, AlarmsProps
from infra.constructs.buckets import (
    CHECKPOINTS_PREFIX,
    CONTROL_PREFIX,
    FAILURES_PREFIX,
    WAREHOUSE_PREFIX,
    Buckets,
    BucketsProps,
)
from infra.constructs.catalog import CatalogDatabase, CatalogDatabaseProps
from infra.constructs.emr_cluster import EmrCluster, EmrClusterProps
from infra.constructs.failure_topic import FailureTopic, FailureTopicProps
from infra.constructs.job_deployment import JobDeployment, JobDeploymentProps
from infra.constructs.network import Network, NetworkProps
from infra.constructs.roles import Roles, RolesProps
from infra.constructs.stream import EventStream, EventStreamProps
from infra.job_config import job_config_for

INSTANCE_TAG = "streaming:instance"


class StreamingStack(Stack):
    """Exposes what the job deployment needs: ``config``, ``cluster`` (``ref`` is
    the job flow id), ``job_role``, ``instance_profile``, ``buckets`` (``data``,
    ``artifacts``), ``stream``, ``topic_name``, ``topic_arn``, ``msk_cluster_arn``,
    ``database_name``."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: InstanceConfig, **kwargs: Any
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            stack_name=config.stack_name,
            description=f"Streaming instance {config.instance_id}: Kinesis to Spark on EMR",
            termination_protection=config.termination_protection,
            **kwargs,
        )
        self.config = config
        Tags.of(self).add(INSTANCE_TAG, config.instance_id)
        removal = (
            RemovalPolicy.DESTROY if config.removal_policy == "DESTROY" else RemovalPolicy.RETAIN
        )

        network = Network(self, "Network", props=NetworkProps(config.network, removal))
        events = EventStream(
            self,
            "Events",
            props=EventStreamProps(config.stream_name, config.stream, removal),
        )
        self.stream = events.stream
        self.buckets = Buckets(self, "Buckets", props=BucketsProps(removal))
        catalog = CatalogDatabase(
            self,
            "Catalog",
            props=CatalogDatabaseProps(
                database_name=config.database_name,
                bucket=self.buckets.data,
                prefix=f"{WAREHOUSE_PREFIX}{config.database_name}.db/",
                # The job's own fields (JobConfig.event_fields, from job.event_fields).
                fields=config.job.event_fields,
                table_definition_sha256=config.table_definition_sha256,
                maintenance=config.job.table_maintenance,
                removal_policy=removal,
                lake_formation_permissions=config.lake_formation_permissions,
            ),
        )
        catalog_location = catalog.location_uri
        self.database_name = catalog.database_name
        failures = FailureTopic(
            self,
            "Failures",
            props=FailureTopicProps(
                topic_name=config.failure_topic_name,
                cluster_name=config.stack_name,
                config=config.kafka,
                vpc=network.vpc,
                subnets=tuple(network.private_subnets[: msk_client_subnets(config.network)]),
                removal_policy=removal,
            ),
        )
        self.failure_topic = failures
        self.topic_name = failures.topic_name
        self.topic_arn = failures.topic_arn
        self.msk_cluster_arn = failures.cluster_arn

        roles = Roles(self, "Roles", props=RolesProps(config.instance_id))
        self.roles = roles
        self.job_role = roles.job_role
        self.instance_profile = roles.instance_profile

        emr = EmrCluster(
            self,
            "Emr",
            props=EmrClusterProps(
                cluster_name=config.stack_name,
                config=config.emr,
                termination_protection=config.termination_protection,
                vpc=network.vpc,
                subnet=network.private_subnets[0],
                log_uri=self.buckets.emr_log_uri,
                service_role=roles.service_role,
                boot=roles.boot,
                instance_profile=roles.instance_profile,
                removal_policy=removal,
                depends_on=(*network.egress_ready, *self.buckets.emptied_on_delete),
            ),
        )
        self.emr = emr
        self.cluster = emr.cluster
        failures.allow_client(emr.master_security_group)
        failures.allow_client(emr.core_security_group)

        self.alarms = Alarms(
            self,
            "Alarms",
            props=AlarmsProps(
                name_prefix=config.stack_name,
                instance_id=config.instance_id,
                trigger_interval_sec=config.job.trigger_interval_sec,
                config=config.alarms,
                stream=self.stream,
                cluster_id=emr.cluster.ref,
                removal_policy=removal,
            ),
        )

        # What the nodes need to boot, in the job role's boot policy (the
        # cluster grants its disk key and TLS certificates there itself).
        self.buckets.grant_boot(roles.boot)
        # Everything the job may touch, each scoped to this instance.
        events.grant_job(roles.job_role, consumer_type=config.job.source.consumer_type)
        self.buckets.grant_job(roles.job_role)
        catalog.grant_job(roles.job_role)
        failures.grant_job(roles.job_role)
        self.alarms.grant_job(roles.job_role)
        # The nodes boot with the instance profile as soon as the cluster is
        # created: it waits for every policy of its two roles (the cluster
        # references only the role names; docs/infra.md, "Creation order").
        emr.cluster.node.add_dependency(*roles.policies)

        self._outputs()
        self.job = self._job_deployment(config, catalog_location)
        # The step starts the job at once: it waits for what the job uses
        # that it does not reference (the table and the topic are named by
        # literals in the job's config) and for the job role's permissions.
        self.job.attach(
            emr.cluster,
            after=(
                *roles.job_policies,
                catalog.events.table,
                failures.topic,
                *catalog.lake_formation_grants,
            ),
        )

    def _job_deployment(self, config: InstanceConfig, database_location: str) -> JobDeployment:
        """The job's artifact, its config (from the same instance declaration, via
        ``job_config_for``) and the EMR step that runs it on this instance's cluster."""
        job_config = job_config_for(
            config,
            checkpoint_location=self.buckets.data.s3_url_for_object(
                f"{CHECKPOINTS_PREFIX}{config.instance_id}/"
            ),
            kafka_cluster_arn=self.msk_cluster_arn,
            database_location=database_location,
            stop_marker_path=self.buckets.data.s3_url_for_object(
                f"{CONTROL_PREFIX}{config.instance_id}/stop"
            ),
            failure_store_location=self.buckets.data.s3_url_for_object(
                f"{FAILURES_PREFIX}{config.instance_id}/"
            ),
        )
        self.job_config = job_config
        # The producer and the topic take their limits from one setting; a
        # drift between them would make every large failure fail its batch.
        check_limits(
            producer_message_max_bytes=job_config.kafka.max_message_bytes,
            topic_max_message_bytes=self.failure_topic.max_message_bytes,
            field=f"{config.instance_id}: kafka.max_message_bytes",
        )
        return JobDeployment(
            self,
            "Job",
            props=JobDeploymentProps(
                instance_id=config.instance_id,
                artifacts_bucket=self.buckets.artifacts,
                job_config=job_config,
                python=config.emr.job_python,
                removal_policy=(
                    RemovalPolicy.DESTROY
                    if config.removal_policy == "DESTROY"
                    else RemovalPolicy.RETAIN
                ),
            ),
        )

    def _outputs(self) -> None:
        """What operators look up after a deploy (an existing MSK cluster's owner
        needs the EMR security groups to open port 9098 to them)."""
        for output_id, value in (
            ("StreamName", self.stream.stream_name),
            ("DataBucketName", self.buckets.data.bucket_name),
            ("ArtifactsBucketName", self.buckets.artifacts.bucket_name),
            ("GlueDatabaseName", self.database_name),
            ("FailureTopicArn", self.topic_arn),
            ("MskClusterArn", self.msk_cluster_arn),
            ("EmrClusterId", self.cluster.ref),
            ("EmrMasterSecurityGroupId", self.emr.master_security_group.security_group_id),
            ("EmrCoreSecurityGroupId", self.emr.core_security_group.security_group_id),
            ("AlarmTopicArn", self.alarms.topic.topic_arn),
        ):
            CfnOutput(self, output_id, value=value)
