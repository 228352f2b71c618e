"""The events table: an Apache Iceberg table in the instance's own Glue
database, and the three Glue table optimizers that keep its files and history
bounded (docs/design.md, "Incidents": a micro-batch whose cost grows with what
the table already holds). Each optimizer runs as a role of its own that can
touch this table and its S3 prefix only.

The stack creates the table once; after that the job owns it. Every batch is a
pyiceberg commit (a new metadata file, then a Glue ``UpdateTable`` with a
version check that sets the ``table_type``/``metadata_location`` parameters).
A CloudFormation UPDATE of the table would replace its ``TableInput`` and drop
those parameters, leaving a table no engine can read
(https://github.com/aws-cloudformation/cloudformation-coverage-roadmap/issues/2495,
https://github.com/aws-cloudformation/cloudformation-coverage-roadmap/issues/1919).
CloudFormation only updates a resource whose template changed
(https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/using-cfn-updating-stacks-update-behaviors.html),
so the table's definition depends on nothing an ordinary deploy changes, and a
change to it (another seed, another location) stops ``cdk synth``
(:func:`check_definition`) instead of breaking a live table
(docs/infra.md, "The events table"). The columns follow the table's seed: the
event schema it was created with (``InstanceConfig.seed_schema``); fields an
instance declares later reach the live table through the job
(app.table.evolution), once synth has checked they are additive
(infra.schema_change). An instance with fields of its own pins its table's
definition in ``table_definition_sha256``, the others share
:data:`DEPLOYED_DEFINITION_SHA256`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from aws_cdk import Acknowledgment, Aws, RemovalPolicy, Stack, Validations
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lakeformation as lakeformation
from aws_cdk import aws_s3 as s3
from constructs import Construct

from app.config import EventField, TableMaintenance
from app.contract import EVENTS_TABLE
from app.table.layout import seed_columns

EVENTS_TABLE_LOGICAL_ID: Final = "EventsTable"

OptimizerType = Literal["compaction", "retention", "orphan_file_deletion"]
OPTIMIZER_TYPES: Final[tuple[OptimizerType, ...]] = (
    "compaction",
    "retention",
    "orphan_file_deletion",
)
# Pinned like the table's: an optimizer's identity is (catalog, database,
# table, type), so a replacement (create the new, then delete the old) would
# collide with itself.
OPTIMIZER_LOGICAL_IDS: Final[dict[OptimizerType, str]] = {
    "compaction": "EventsTableCompaction",
    "retention": "EventsTableRetention",
    "orphan_file_deletion": "EventsTableOrphanFileDeletion",
}
# The log group each optimizer writes to; AWS names them, one per type for the
# whole account and region
# (https://docs.aws.amazon.com/glue/latest/dg/optimization-prerequisites.html).
OPTIMIZER_LOG_GROUPS: Final[dict[OptimizerType, str]] = {
    "compaction": "/aws-glue/iceberg-compaction/logs",
    "retention": "/aws-glue/iceberg-retention/logs",
    "orphan_file_deletion": "/aws-glue/iceberg-orphan-file-deletion/logs",
}

# With lake_formation_permissions: each optimizer role's Lake Formation
# permissions on the table. The prerequisites page lists ALTER, DESCRIBE,
# INSERT and DELETE for an optimizer role that does not have the
# IAM_ALLOWED_PRINCIPALS grant on the table
# (https://docs.aws.amazon.com/glue/latest/dg/optimization-prerequisites.html);
# the orphan-file optimizer neither updates the table nor writes files (the
# same page), so it gets neither ALTER (glue:UpdateTable) nor INSERT (writing
# data), as its IAM policy has neither
# (https://docs.aws.amazon.com/lake-formation/latest/dg/lf-permissions-reference.html).
OPTIMIZER_LAKE_FORMATION_PERMISSIONS: Final[dict[OptimizerType, tuple[str, ...]]] = {
    "compaction": ("ALTER", "DELETE", "DESCRIBE", "INSERT"),
    "retention": ("ALTER", "DELETE", "DESCRIBE", "INSERT"),
    "orphan_file_deletion": ("DELETE", "DESCRIBE"),
}

# Glue writes the first metadata file of an Iceberg table created with
# IcebergInput (MetadataOperation CREATE; format version 2 is the default)
# https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-glue-table-iceberginput.html
ICEBERG_METADATA_OPERATION: Final = "CREATE"
ICEBERG_FORMAT_VERSION: Final = "2"
TABLE_DESCRIPTION: Final = (
    "Events of one streaming instance (Apache Iceberg). Created by CloudFormation; "
    "written and evolved by the instance's job only."
)
# Where the location's bucket and database stand in the instance-free
# definition the fingerprint covers.
BUCKET_PLACEHOLDER: Final = "<data bucket>"
DATABASE_PLACEHOLDER: Final = "<database>"

# The SHA-256 of the definition every deployed instance of the default event
# schema (app.config.DEFAULT_EVENT_FIELDS) created its table with
# (:func:`definition_fingerprint`); an instance with event fields of its own
# pins its own (InstanceConfig.table_definition_sha256). Change it only
# together with the migration in docs/infra.md ("Changing the events table").
DEPLOYED_DEFINITION_SHA256: Final = (
    "27a67857cf2468c798610c663878595bf1224fa0cbea1e904c5d070701e3dc99"
)


class TableDefinitionChangedError(ValueError):
    """The events table's CloudFormation definition is not the deployed one."""


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


def table_key_prefix(database_prefix: str) -> str:
    """The table's key prefix, no trailing slash: pyiceberg's own default for
    a table of a Glue database (``<database location>/<table>``), and the form
    Iceberg paths are joined to (``<location>/data/...``, ``<location>/metadata/...``)."""
    return f"{database_prefix.rstrip('/')}/{EVENTS_TABLE}"


def table_definition(fields: Sequence[EventField], location: str) -> dict[str, Any]:
    """The table resource's properties except the catalog and database ids, in
    CloudFormation's spelling: the Hive-style ``TableInput`` Glue derives the
    Iceberg schema from, and the create-time Iceberg directive. No partition
    spec: see docs/infra.md ("The events table"). The columns are the seed
    (:func:`app.table.layout.seed_columns`): columns added to the contract later
    reach every table, new or deployed, through the job (app.table.evolution),
    so this definition, and its fingerprint, stay what was deployed."""
    return {
        "TableInput": {
            "Name": EVENTS_TABLE,
            "Description": TABLE_DESCRIPTION,
            "TableType": "EXTERNAL_TABLE",
            "StorageDescriptor": {
                "Location": location,
                "Columns": [
                    {"Name": column.name, "Type": column.glue_type}
                    for column in seed_columns(fields)
                ],
            },
        },
        "OpenTableFormatInput": {
            "IcebergInput": {
                "MetadataOperation": ICEBERG_METADATA_OPERATION,
                "Version": ICEBERG_FORMAT_VERSION,
            }
        },
    }


def definition_fingerprint(
    fields: Sequence[EventField], database_name: str, database_prefix: str
) -> str:
    """SHA-256 of the definition with the instance's bucket and database names
    replaced by placeholders: equal for every instance of one code version."""
    prefix = table_key_prefix(database_prefix).replace(database_name, DATABASE_PLACEHOLDER)
    definition = table_definition(fields, f"s3://{BUCKET_PLACEHOLDER}/{prefix}")
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def check_definition(
    fields: Sequence[EventField],
    database_name: str,
    database_prefix: str,
    deployed: str | None = None,
) -> None:
    """Stop the synth when the table's definition differs from the one it was
    created with (``deployed``; None: :data:`DEPLOYED_DEFINITION_SHA256`):
    deploying it would make CloudFormation update the live table. Synth cannot
    see whether the table exists yet, so the message gives both ways out: pin a
    new instance's definition, or migrate a deployed one."""
    pinned = DEPLOYED_DEFINITION_SHA256 if deployed is None else deployed
    found = definition_fingerprint(fields, database_name, database_prefix)
    if found == pinned:
        return
    columns = ", ".join(f"{c.name} {c.glue_type}" for c in seed_columns(fields))
    source = (
        "the default event schema's (DEPLOYED_DEFINITION_SHA256)"
        if deployed is None
        else "the instance's table_definition_sha256"
    )
    raise TableDefinitionChangedError(
        f"events table {database_name}.{EVENTS_TABLE}: its CloudFormation definition "
        f"(sha256 {found}; columns from job.event_fields: {columns}) is not the one its "
        f"table was created with ({pinned}, {source}).\n"
        "- A table not deployed yet (a new instance, or event fields chosen before the "
        f'first deploy): set "table_definition_sha256": "{found}" in the instance\'s '
        "cdk.json entry.\n"
        "- A deployed table whose job.event_fields only grew (a new optional field, "
        "int -> long, float -> double, required -> optional): keep the pin and set the "
        'instance\'s "table_seed" to the event schema the table was created with '
        '(docs/infra.md, "Event schema"); the new job adds the columns at start.\n'
        "- A deployed table: its job.event_fields (or this code's table definition) "
        "changed. Deploying it would make CloudFormation update the live Iceberg table, "
        "which replaces its TableInput and drops the table_type and metadata_location "
        "parameters the job's commits set: no engine could read the table afterwards. "
        "Restore the instance's event fields, or follow docs/infra.md "
        '("Changing the events table") before changing the pin.'
    )


def retention_days(hours: int) -> int:
    """Glue's retention optimizer counts whole days; never fewer than the job keeps."""
    return math.ceil(hours / 24)


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
        key_prefix = table_key_prefix(props.database_prefix)
        self.table_name = EVENTS_TABLE
        self.location = props.bucket.s3_url_for_object(key_prefix)
        definition = table_definition(props.fields, self.location)
        table_input = definition["TableInput"]
        storage = table_input["StorageDescriptor"]
        iceberg = definition["OpenTableFormatInput"]["IcebergInput"]
        # The documented shape (TableInput + IcebergInput CREATE)
        # https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-glue-table.html
        # The resource schema's IcebergInput.IcebergTableInput (which could carry
        # a partition spec) is not used: CloudFormation was found to roll back
        # every template carrying it (https://github.com/go-to-k/cdkd/issues/1454),
        # and the Data Catalog creates Iceberg tables without partitions or
        # properties (https://docs.aws.amazon.com/lake-formation/latest/dg/creating-iceberg-tables.html).
        # The job adds its partition spec (app.table.layout.partitioning) to the still-empty table.
        self.table = glue.CfnTable(
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
        # A new logical ID would replace the table: create-before-delete of a
        # table with the same name fails, and the data's catalog entry with it.
        self.table.override_logical_id(EVENTS_TABLE_LOGICAL_ID)
        self.table.apply_removal_policy(props.removal_policy)

        arn = f"arn:{Aws.PARTITION}:glue:{Aws.REGION}:{Aws.ACCOUNT_ID}"
        self.catalog_arn = f"{arn}:catalog"
        self.database_arn = f"{arn}:database/{props.database_name}"
        # https://docs.aws.amazon.com/glue/latest/dg/glue-specifying-resource-arns.html
        self.table_arn = f"{arn}:table/{props.database_name}/{EVENTS_TABLE}"
        self._bucket = props.bucket
        self._key_prefix = key_prefix

        self.optimizer_roles: dict[OptimizerType, iam.Role] = {}
        self.optimizers: dict[OptimizerType, glue.CfnTableOptimizer] = {}
        self.lake_formation_grants: list[lakeformation.CfnPrincipalPermissions] = []
        for kind in OPTIMIZER_TYPES:
            if kind == "compaction" and not props.maintenance.compaction:
                continue
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
                grant = lake_formation_grant(
                    self,
                    f"{OPTIMIZER_LOGICAL_IDS[kind]}LakeFormation",
                    principal_arn=role.role_arn,
                    database_name=props.database_name,
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
        """The same numbers the job applies (app.config.TableMaintenance).
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
        narrowed to this table: S3 on its prefix, Glue on its ARN, Logs on the
        optimizer's log group. Orphan-file deletion gets neither
        ``glue:UpdateTable`` nor ``s3:PutObject`` (the page says it needs
        neither). Inline, so the permissions exist before the optimizer that
        references the role.
        https://docs.aws.amazon.com/glue/latest/dg/optimization-prerequisites.html"""
        writes = kind != "orphan_file_deletion"
        objects = self._bucket.arn_for_objects(f"{self._key_prefix}/*")
        log_group = (
            f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:"
            f"{OPTIMIZER_LOG_GROUPS[kind]}:*"
        )
        statements = [
            iam.PolicyStatement(
                sid="TableObjects",
                actions=[
                    "s3:GetObject",
                    "s3:DeleteObject",
                    *(["s3:PutObject"] if writes else []),
                ],
                resources=[objects],
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
                actions=["glue:GetTable", *(["glue:UpdateTable"] if writes else [])],
                resources=[self.catalog_arn, self.database_arn, self.table_arn],
            ),
            iam.PolicyStatement(
                sid="OptimizerLogs",
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[log_group],
            ),
        ]
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
            inline_policies={"EventsTable": iam.PolicyDocument(statements=statements)},
        )
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
        return role


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
