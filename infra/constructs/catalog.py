"""The instance's own Glue database and its events table (docs/design.md,
"Incidents": six domains on one database, one hot domain slowed all). Both live
in the instance's bucket, and only this instance's job may use them
(:meth:`CatalogDatabase.grant_job`). The table, its optimizers and their roles
are :class:`~infra.constructs.events_table.EventsTable`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from app.config import EventField, TableMaintenance
from infra.constructs.events_table import EventsTable, EventsTableProps

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


@dataclass(frozen=True)
class CatalogDatabaseProps:
    """``prefix`` is the database's key prefix in ``bucket``
    (``warehouse/<database>.db/``); ``fields`` are the job's event fields
    (``JobConfig.event_fields``) and ``maintenance`` its table maintenance, which
    the table's columns and optimizers follow."""

    database_name: str
    bucket: s3.IBucket
    prefix: str
    fields: tuple[EventField, ...]
    maintenance: TableMaintenance
    removal_policy: RemovalPolicy


class CatalogDatabase(Construct):
    """Exposes ``database``, ``database_name``, ``location_uri``, ``events``
    (the :class:`EventsTable`) and the ARNs IAM needs: ``catalog_arn``,
    ``database_arn``, ``table_arn`` (the events table only);
    :meth:`grant_job` lets the job use them."""

    def __init__(self, scope: Construct, construct_id: str, *, props: CatalogDatabaseProps) -> None:
        super().__init__(scope, construct_id)
        self.database_name = props.database_name
        self.location_uri = props.bucket.s3_url_for_object(props.prefix)
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

        self.events = EventsTable(
            self,
            "Events",
            props=EventsTableProps(
                database_name=props.database_name,
                bucket=props.bucket,
                database_prefix=props.prefix,
                fields=props.fields,
                maintenance=props.maintenance,
                removal_policy=props.removal_policy,
            ),
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
