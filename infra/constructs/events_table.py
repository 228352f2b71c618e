"""The events table's construct: an Apache Iceberg table in the instance's own
Glue database, and the three Glue table optimizers that keep its files and
history bounded (docs/design.md, "Incidents": a micro-batch whose cost grows
with what the table already holds). Each optimizer runs as a role of its own
that can touch this table and its S3 prefix only.

What the table is created from, its fingerprint and the pinned logical IDs
are :mod:`infra.table_definition` (no CDK); this module turns them into
resources. The stack creates the table once; after that the job owns it, and
synth refuses a definition that is not the deployed one
(:func:`infra.table_definition.check_definition`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Acknowledgment, Aws, RemovalPolicy, Stack, Validations
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lakeformation as lakeformation
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.table_definition import (
    EVENTS_TABLE_LOGICAL_ID,
    OPTIMIZER_LAKE_FORMATION_PERMISSIONS,
    OPTIMIZER_LOG_ACTIONS,
    OPTIMIZER_LOG_GROUPS,
    OPTIMIZER_LOGICAL_IDS,
    OPTIMIZER_TYPES,
    OptimizerType,
    check_definition,
    optimizer_object_actions,
    optimizer_table_actions,
    retention_days,
    table_definition,
    table_key_prefix,
)
from model.config import EventField, TableMaintenance
from model.contract import EVENTS_TABLE


@dataclass(frozen=True)
class EventsTableProps:
    """``database_prefix`` is the database's key prefix in ``bucket``
    (``warehouse/<database>.db/``); the table lives at ``<prefix>events``."""

    database_name: str
    bucket: s3.IBucket
    database_prefix: str
    fields: tuple[EventField, ...]
    maintenance: TableMaintenance
    removal_policy: RemovalPolicy
    # Grant the optimizer roles their table through Lake Formation too.
    lake_formation_permissions: bool = False
    # The instance's pin (InstanceConfig.table_definition_sha256); None: the
    # default schema's DEPLOYED_DEFINITION_SHA256.
    deployed_sha256: str | None = None


def lake_formation_grant(
    scope: Construct,
    construct_id: str,
    *,
    principal_arn: str,
    database_name: str,
    table_name: str | None,
    permissions: Sequence[str],
) -> lakeformation.CfnPrincipalPermissions:
    """``permissions`` for one IAM principal on this account's catalog: on the
    database, or on ``table_name`` in it; no grant option.
    https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-lakeformation-principalpermissions.html"""
    resource = (
        lakeformation.CfnPrincipalPermissions.ResourceProperty(
            database=lakeformation.CfnPrincipalPermissions.DatabaseResourceProperty(
                catalog_id=Aws.ACCOUNT_ID, name=database_name
            )
        )
        if table_name is None
        else lakeformation.CfnPrincipalPermissions.ResourceProperty(
            table=lakeformation.CfnPrincipalPermissions.TableResourceProperty(
                catalog_id=Aws.ACCOUNT_ID, database_name=database_name, name=table_name
            )
        )
    )
    return lakeformation.CfnPrincipalPermissions(
        scope,
        construct_id,
        catalog=Aws.ACCOUNT_ID,
        principal=lakeformation.CfnPrincipalPermissions.DataLakePrincipalProperty(
            data_lake_principal_identifier=principal_arn
        ),
        resource=resource,
        permissions=list(permissions),
        permissions_with_grant_option=[],
    )


class EventsTable(Construct):
    """Exposes ``table`` (the ``AWS::Glue::Table``), ``table_name``,
    ``location`` (its S3 URI), ``table_arn``, ``optimizers``,
    ``optimizer_roles`` (by optimizer type) and ``lake_formation_grants``
    (the optimizer roles', when Lake Formation permissions are on)."""

    def __init__(self, scope: Construct, construct_id: str, *, props: EventsTableProps) -> None:
        super().__init__(scope, construct_id)
        check_definition(
            props.fields, props.database_name, props.database_prefix, props.deployed_sha256
        )
        self._bucket = props.bucket
        self._key_prefix = table_key_prefix(props.database_prefix)
        self.table_name = EVENTS_TABLE
        self.location = props.bucket.s3_url_for_object(self._key_prefix)
        self.table = self._table(props)

        arn = f"arn:{Aws.PARTITION}:glue:{Aws.REGION}:{Aws.ACCOUNT_ID}"
        self.catalog_arn = f"{arn}:catalog"
        self.database_arn = f"{arn}:database/{props.database_name}"
        # https://docs.aws.amazon.com/glue/latest/dg/glue-specifying-resource-arns.html
        self.table_arn = f"{arn}:table/{props.database_name}/{EVENTS_TABLE}"

        self.optimizer_roles: dict[OptimizerType, iam.Role] = {}
        self.optimizers: dict[OptimizerType, glue.CfnTableOptimizer] = {}
        self.lake_formation_grants: list[lakeformation.CfnPrincipalPermissions] = []
        for kind in OPTIMIZER_TYPES:
            if kind != "compaction" or props.maintenance.compaction:
                self._add_optimizer(kind, props)

    def _table(self, props: EventsTableProps) -> glue.CfnTable:
        """The ``AWS::Glue::Table`` of :func:`infra.table_definition.table_definition`,
        under its pinned logical ID.

        The documented shape (TableInput + IcebergInput CREATE)
        https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-glue-table.html
        The resource schema's IcebergInput.IcebergTableInput (which could carry
        a partition spec) is not used: CloudFormation was found to roll back
        every template carrying it (https://github.com/go-to-k/cdkd/issues/1454),
        and the Data Catalog creates Iceberg tables without partitions or
        properties (https://docs.aws.amazon.com/lake-formation/latest/dg/creating-iceberg-tables.html).
        The job adds its partition spec (model.table_layout.partitioning) to the
        still-empty table."""
        definition = table_definition(props.fields, self.location)
        table_input: dict[str, Any] = definition["TableInput"]
        storage: dict[str, Any] = table_input["StorageDescriptor"]
        iceberg: dict[str, Any] = definition["OpenTableFormatInput"]["IcebergInput"]
        table = glue.CfnTable(
            self,
            "Table",
            catalog_id=Aws.ACCOUNT_ID,
            database_name=props.database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=table_input["Name"],
                description=table_input["Description"],
                table_type=table_input["TableType"],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    location=storage["Location"],
                    columns=[
                        glue.CfnTable.ColumnProperty(name=c["Name"], type=c["Type"])
                        for c in storage["Columns"]
                    ],
                ),
            ),
            open_table_format_input=glue.CfnTable.OpenTableFormatInputProperty(
                iceberg_input=glue.CfnTable.IcebergInputProperty(
                    metadata_operation=iceberg["MetadataOperation"],
                    version=iceberg["Version"],
                )
            ),
        )
        table.override_logical_id(EVENTS_TABLE_LOGICAL_ID)
        table.apply_removal_policy(props.removal_policy)
        return table

    def _add_optimizer(self, kind: OptimizerType, props: EventsTableProps) -> None:
        """One optimizer, its role and (with Lake Formation on) its grant."""
        role = self._optimizer_role(kind)
        optimizer = glue.CfnTableOptimizer(
            self,
            OPTIMIZER_LOGICAL_IDS[kind],
            catalog_id=Aws.ACCOUNT_ID,
            database_name=props.database_name,
            table_name=EVENTS_TABLE,
            type=kind,
            table_optimizer_configuration=self._configuration(kind, role, props.maintenance),
        )
        optimizer.override_logical_id(OPTIMIZER_LOGICAL_IDS[kind])
        # The names above are literals, not references: without this,
        # CloudFormation could create an optimizer before its table.
        optimizer.add_resource_dependency(
            self.table, "its table is named by a literal, not a reference"
        )
        self.optimizer_roles[kind] = role
        self.optimizers[kind] = optimizer
        if props.lake_formation_permissions:
            self._grant_lake_formation(kind, role, optimizer, props.database_name)

    def _grant_lake_formation(
        self,
        kind: OptimizerType,
        role: iam.Role,
        optimizer: glue.CfnTableOptimizer,
        database_name: str,
    ) -> None:
        """The optimizer role's Lake Formation permissions on the table."""
        grant = lake_formation_grant(
            self,
            f"{OPTIMIZER_LOGICAL_IDS[kind]}LakeFormation",
            principal_arn=role.role_arn,
            database_name=database_name,
            table_name=EVENTS_TABLE,
            permissions=OPTIMIZER_LAKE_FORMATION_PERMISSIONS[kind],
        )
        grant.add_resource_dependency(
            self.table, "it names its table by a literal, not a reference"
        )
        # The optimizer runs as the role: not before the role may use the table.
        optimizer.add_resource_dependency(grant, "its role's table permissions")
        self.lake_formation_grants.append(grant)

    def _configuration(
        self, kind: OptimizerType, role: iam.Role, maintenance: TableMaintenance
    ) -> glue.CfnTableOptimizer.TableOptimizerConfigurationProperty:
        """The same numbers the job applies (model.config.TableMaintenance).
        https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-glue-tableoptimizer.html"""
        return glue.CfnTableOptimizer.TableOptimizerConfigurationProperty(
            enabled=True,
            role_arn=role.role_arn,
            # Compaction sets neither: Glue's defaults (binpack).
            retention_configuration=_retention(maintenance) if kind == "retention" else None,
            orphan_file_deletion_configuration=(
                _orphan_file_deletion(self.location, maintenance)
                if kind == "orphan_file_deletion"
                else None
            ),
        )

    def _optimizer_role(self, kind: OptimizerType) -> iam.Role:
        """A role per optimizer with what the prerequisites page lists, each
        narrowed to this table (:meth:`_optimizer_statements`). Inline, so the
        permissions exist before the optimizer that references the role.
        https://docs.aws.amazon.com/glue/latest/dg/optimization-prerequisites.html"""
        role = iam.Role(
            self,
            f"{OPTIMIZER_LOGICAL_IDS[kind]}Role",
            # Glue may assume the role for this account's catalog only (the
            # confused-deputy guard, https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html).
            # ...IfExists: Glue's optimizer documentation
            # (https://docs.aws.amazon.com/glue/latest/dg/optimization-prerequisites.html)
            # does not say it sends these keys when it assumes the role; a hard
            # condition would stop the optimizers if it does not, this one
            # refuses any other account or resource whenever it does.
            assumed_by=iam.ServicePrincipal(
                "glue.amazonaws.com",
                conditions={
                    "StringEqualsIfExists": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLikeIfExists": {
                        "aws:SourceArn": f"arn:{Aws.PARTITION}:glue:{Aws.REGION}:{Aws.ACCOUNT_ID}:*"
                    },
                },
            ),
            description=f"Glue {kind} optimizer of the events table in {self.database_arn}",
            inline_policies={
                "EventsTable": iam.PolicyDocument(statements=self._optimizer_statements(kind))
            },
        )
        self._acknowledge_wildcards(role, kind)
        return role

    def _optimizer_statements(self, kind: OptimizerType) -> list[iam.PolicyStatement]:
        """S3 on the table's prefix, Glue on its ARN, Logs on the optimizer's
        log group. Orphan-file deletion gets neither ``glue:UpdateTable`` nor
        ``s3:PutObject`` (:func:`infra.table_definition.optimizer_writes`)."""
        return [
            iam.PolicyStatement(
                sid="TableObjects",
                actions=optimizer_object_actions(kind),
                resources=[self._bucket.arn_for_objects(f"{self._key_prefix}/*")],
            ),
            # ListBucket is a bucket action; s3:prefix narrows it to the table
            # https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html
            iam.PolicyStatement(
                sid="TableListing",
                actions=["s3:ListBucket"],
                resources=[self._bucket.bucket_arn],
                conditions={
                    "StringLike": {"s3:prefix": [self._key_prefix, f"{self._key_prefix}/*"]}
                },
            ),
            iam.PolicyStatement(
                sid="TableMetadata",
                actions=optimizer_table_actions(kind),
                resources=[self.catalog_arn, self.database_arn, self.table_arn],
            ),
            iam.PolicyStatement(
                sid="OptimizerLogs",
                actions=list(OPTIMIZER_LOG_ACTIONS),
                resources=[
                    f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:"
                    f"{OPTIMIZER_LOG_GROUPS[kind]}:*"
                ],
            ),
        ]

    def _acknowledge_wildcards(self, role: iam.Role, kind: OptimizerType) -> None:
        """cdk-nag's IAM5 findings on the role's two bounded wildcards."""
        # cdk-nag names the bucket by its logical ID (<DataBucket.Arn>).
        bucket = self._bucket.node.default_child
        bucket_id = (
            Stack.of(self).resolve(bucket.logical_id)
            if isinstance(bucket, s3.CfnBucket)
            else self._bucket.node.id
        )
        for finding, reason in (
            (
                f"Resource::<{bucket_id}.Arn>/{self._key_prefix}/*",
                "Iceberg data and metadata files have generated names under the events "
                "table's own prefix; the wildcard is bounded by that prefix.",
            ),
            (
                f"Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:"
                f"log-group:{OPTIMIZER_LOG_GROUPS[kind]}:*",
                "Glue names this optimizer log group and its streams; the wildcard covers the "
                "streams of that one log group only.",
            ),
        ):
            Validations.of(role).acknowledge(
                Acknowledgment(id=f"AwsSolutions-IAM5[{finding}]", reason=reason)
            )


def _retention(
    maintenance: TableMaintenance,
) -> glue.CfnTableOptimizer.RetentionConfigurationProperty:
    # https://docs.aws.amazon.com/glue/latest/webapi/API_IcebergRetentionConfiguration.html
    return glue.CfnTableOptimizer.RetentionConfigurationProperty(
        iceberg_configuration=glue.CfnTableOptimizer.IcebergRetentionConfigurationProperty(
            snapshot_retention_period_in_days=retention_days(maintenance.snapshot_retention_hours),
            number_of_snapshots_to_retain=maintenance.snapshots_to_retain,
            # Expiry without deleting would leave every expired file to the
            # orphan-file optimizer.
            clean_expired_files=True,
        )
    )


def _orphan_file_deletion(
    location: str, maintenance: TableMaintenance
) -> glue.CfnTableOptimizer.OrphanFileDeletionConfigurationProperty:
    return glue.CfnTableOptimizer.OrphanFileDeletionConfigurationProperty(
        iceberg_configuration=glue.CfnTableOptimizer.IcebergConfigurationProperty(
            location=location,
            orphan_file_retention_period_in_days=maintenance.orphan_file_retention_days,
        )
    )
