"""The instance's own Glue database and its events table (docs/design.md,
"Incidents": six domains on one database, one hot domain slowed all). Both live
in the instance's bucket, and only this instance's job may use them
(:meth:`CatalogDatabase.grant_job`). The table, its optimizers and their roles
are :class:`~infra.constructs.events_table.EventsTable`."""

from __future__ import annotations

from typing import Final

from aws_cdk import Aws
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lakeformation as lakeformation
from constructs import Construct, IDependable

from infra.config import InstanceConfig
from infra.constructs.buckets import Buckets
from infra.constructs.events_table import EventsTable, EventsTableProps, lake_formation_grant
from infra.constructs.instance import removal_policy, stack_output
from infra.schema_change import check_schema_change
from model.config import EventField, JobConfig

DATABASE_LOGICAL_ID: Final = "GlueDatabase"
# Spark's Hive client (the Glue Data Catalog client on EMR) looks this database
# up when it starts, whatever database the job uses, and creates it when it is
# missing; a failed lookup stops the session ("Unable to verify existence of
# default database").
# https://docs.aws.amazon.com/glue/latest/dg/data-quality-trouble.html#data-quality-trouble-error-7
# (the client: AWSCatalogMetastoreClient.doesDefaultDBExist/createDefaultDatabase in
# https://github.com/awslabs/aws-glue-data-catalog-client-for-apache-hive-metastore)
HIVE_DEFAULT_DATABASE: Final = "default"

# What the job does with its catalog now: pyiceberg's GlueCatalog reads the
# database and the events table, and commits with UpdateTable (with the Glue
# VersionId it read, so a concurrent commit fails instead of being overwritten).
# It creates no table and no partition (Iceberg keeps partitions in its own
# metadata).
JOB_DATABASE_ACTIONS: Final = ("glue:GetDatabase",)
JOB_TABLE_ACTIONS: Final = ("glue:GetTable", "glue:UpdateTable")
# The Hive client's start-up check of ``default`` (see HIVE_DEFAULT_DATABASE).
DEFAULT_DATABASE_ACTIONS: Final = ("glue:GetDatabase", "glue:CreateDatabase")
# With lake_formation_permissions, the same through Lake Formation
# (https://docs.aws.amazon.com/lake-formation/latest/dg/lf-permissions-reference.html):
# DESCRIBE on the database (GetDatabase); on the events table DESCRIBE
# (GetTable), SELECT (read its metadata and data files), INSERT (write data
# and metadata files), DELETE (the old metadata files each commit removes)
# and ALTER (each commit's UpdateTable). No grant option, nothing on any
# other table, no data location permission (the stack registers no location
# with Lake Formation, so S3 access stays with IAM; docs/infra.md).
JOB_LAKE_FORMATION_DATABASE_PERMISSIONS: Final = ("DESCRIBE",)
JOB_LAKE_FORMATION_TABLE_PERMISSIONS: Final = ("ALTER", "DELETE", "DESCRIBE", "INSERT", "SELECT")


def seed_fields(instance: InstanceConfig) -> tuple[EventField, ...]:
    """The fields the events table's definition is built from: its seed, which
    never changes for a live table. Synth stops here when the declared fields
    are not an additive change of it (:func:`infra.schema_change.check_schema_change`);
    the additive ones reach the live table through the job (job.table.evolution)."""
    seed = instance.seed_schema()
    check_schema_change(instance.instance_id, seed, instance.declared_schema())
    return seed.fields


class CatalogDatabaseProps(EventsTableProps):
    """The database's props are its events table's: the same name, bucket,
    ``database_prefix`` (``warehouse/<database>.db/``), removal policy and Lake
    Formation switch, so the table is built from them as they are. ``fields``
    are the job's event fields (``JobConfig.event_fields``) and ``maintenance``
    its table maintenance, which the table's columns and optimizers follow. With
    ``lake_formation_permissions`` (accounts where Lake Formation governs the
    catalog) the job role is granted through it too, besides the optimizer roles
    (InstanceConfig.lake_formation_permissions)."""

    @classmethod
    def of(cls, instance: InstanceConfig, job: JobConfig, buckets: Buckets) -> CatalogDatabaseProps:
        """The instance's database in its data bucket; the table's columns and
        maintenance are what the job runs with (``job``, from ``job_config_for``)."""
        return cls(
            database_name=instance.database_name,
            bucket=buckets.data,
            database_prefix=buckets.database_prefix(instance.database_name),
            fields=seed_fields(instance),
            maintenance=job.table_maintenance,
            deployed_sha256=instance.table_definition_sha256,
            removal_policy=removal_policy(instance),
            lake_formation_permissions=instance.lake_formation_permissions,
        )


class CatalogDatabase(Construct):
    """Exposes ``database``, ``database_name``, ``location_uri``, ``events``
    (the :class:`EventsTable`) and the ARNs IAM needs: ``catalog_arn``,
    ``database_arn``, ``table_arn`` (the events table only);
    :meth:`grant_job` lets the job use them. ``lake_formation_grants`` lists
    the Lake Formation grants (none unless ``lake_formation_permissions``).
    Outputs ``GlueDatabaseName``."""

    def __init__(self, scope: Construct, construct_id: str, *, props: CatalogDatabaseProps) -> None:
        super().__init__(scope, construct_id)
        self.database_name = props.database_name
        self.location_uri = props.bucket.s3_url_for_object(props.database_prefix)
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=props.database_name,
                location_uri=self.location_uri,
                description="Events of one streaming instance; no other instance writes here.",
            ),
        )
        self.database.override_logical_id(DATABASE_LOGICAL_ID)
        self.database.apply_removal_policy(props.removal_policy)

        self.events = EventsTable(self, "Events", props=props)
        self._lake_formation = props.lake_formation_permissions
        self.lake_formation_grants: list[lakeformation.CfnPrincipalPermissions] = list(
            self.events.lake_formation_grants
        )
        # The table names its database by a literal, not a reference.
        self.events.table.add_resource_dependency(
            self.database, "the table names its database by a literal"
        )

        self.catalog_arn = self.events.catalog_arn
        self.database_arn = self.events.database_arn
        self.table_arn = self.events.table_arn
        prefix = f"arn:{Aws.PARTITION}:glue:{Aws.REGION}:{Aws.ACCOUNT_ID}"
        self._default_database_arn = f"{prefix}:database/{HIVE_DEFAULT_DATABASE}"
        stack_output(self, "GlueDatabaseName", self.database_name)

    @property
    def job_needs(self) -> tuple[IDependable, ...]:
        """What the job needs at start that its step does not reference: the
        table and the Lake Formation grants (the job's too, after :meth:`grant_job`)."""
        return (self.events.table, *self.lake_formation_grants)

    def grant_job(self, role: iam.IRole) -> None:
        """Read this database; read and commit the events table (no other table,
        no partition API, no table creation or deletion). Plus look up the
        ``default`` database and create it if the account has none: the Hive
        client does so at start. Creating ``default`` in the stack instead would
        make a second instance's stack in the same account and region fail (the
        database would already exist), or one instance's deletion remove it
        under the others; the client creates it once and ignores "already
        exists" (docs/infra.md, "The default database")."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="OwnGlueDatabase",
                actions=list(JOB_DATABASE_ACTIONS),
                resources=[self.catalog_arn, self.database_arn],
            )
        )
        # Glue checks a table action against the catalog, the database and the table.
        # https://docs.aws.amazon.com/glue/latest/dg/glue-specifying-resource-arns.html
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="OwnEventsTable",
                actions=list(JOB_TABLE_ACTIONS),
                resources=[self.catalog_arn, self.database_arn, self.table_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DefaultDatabase",
                actions=list(DEFAULT_DATABASE_ACTIONS),
                resources=[self.catalog_arn, self._default_database_arn],
            )
        )
        if self._lake_formation:
            self._grant_job_lake_formation(role)

    def _grant_job_lake_formation(self, role: iam.IRole) -> None:
        """The job role's database and table permissions in Lake Formation,
        each created after what it names (by literal, not by reference)."""
        for construct_id, table, permissions, target in (
            (
                "JobDatabaseLakeFormation",
                None,
                JOB_LAKE_FORMATION_DATABASE_PERMISSIONS,
                self.database,
            ),
            (
                "JobTableLakeFormation",
                self.events.table_name,
                JOB_LAKE_FORMATION_TABLE_PERMISSIONS,
                self.events.table,
            ),
        ):
            grant = lake_formation_grant(
                self,
                construct_id,
                principal_arn=role.role_arn,
                database_name=self.database_name,
                table_name=table,
                permissions=permissions,
            )
            grant.add_resource_dependency(target, "it names it by a literal, not a reference")
            self.lake_formation_grants.append(grant)
