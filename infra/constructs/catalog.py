"""The instance's own Glue database (docs/design.md, "Incidents": six domains on
one database, one hot domain slowed all). Its location is in the instance's
bucket, and only this instance's job may use it (:meth:`CatalogDatabase.grant_job`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Acknowledgment, Aws, RemovalPolicy, Validations
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from constructs import Construct

DATABASE_LOGICAL_ID: Final = "GlueDatabase"
# The Hive client reads this database at start-up, whatever database the job uses.
HIVE_DEFAULT_DATABASE: Final = "default"

GLUE_READ_ACTIONS: Final = (
    "glue:GetDatabase",
    "glue:GetTable",
    "glue:GetTables",
    "glue:GetPartition",
    "glue:GetPartitions",
    "glue:BatchGetPartition",
)
GLUE_WRITE_ACTIONS: Final = (
    "glue:CreateTable",
    "glue:UpdateTable",
    "glue:DeleteTable",
    "glue:CreatePartition",
    "glue:BatchCreatePartition",
    "glue:UpdatePartition",
    "glue:BatchUpdatePartition",
    "glue:DeletePartition",
    "glue:BatchDeletePartition",
)


@dataclass(frozen=True)
class CatalogDatabaseProps:
    database_name: str
    location_uri: str
    removal_policy: RemovalPolicy


class CatalogDatabase(Construct):
    """Exposes ``database``, ``database_name`` and the ARNs IAM needs:
    ``catalog_arn``, ``database_arn`` and ``tables_arn`` (this database's tables
    only); :meth:`grant_job` lets the job use them."""

    def __init__(self, scope: Construct, construct_id: str, *, props: CatalogDatabaseProps) -> None:
        super().__init__(scope, construct_id)
        self.database_name = props.database_name
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=props.database_name,
                location_uri=props.location_uri,
                description="Events of one streaming instance; no other instance writes here.",
            ),
        )
        self.database.override_logical_id(DATABASE_LOGICAL_ID)
        self.database.apply_removal_policy(props.removal_policy)
        prefix = f"arn:{Aws.PARTITION}:glue:{Aws.REGION}:{Aws.ACCOUNT_ID}"
        self.catalog_arn = f"{prefix}:catalog"
        self.database_arn = f"{prefix}:database/{props.database_name}"
        self.tables_arn = f"{prefix}:table/{props.database_name}/*"
        self._default_database_arn = f"{prefix}:database/{HIVE_DEFAULT_DATABASE}"

    def grant_job(self, role: iam.IRole) -> None:
        """Read/write this database and its tables only. The Hive client also
        reads the ``default`` database at start-up (never writes it)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="OwnGlueDatabase",
                actions=[*GLUE_READ_ACTIONS, *GLUE_WRITE_ACTIONS],
                resources=[self.catalog_arn, self.database_arn, self.tables_arn],
            )
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="DefaultDatabaseLookup",
                actions=["glue:GetDatabase"],
                resources=[self.catalog_arn, self._default_database_arn],
            )
        )
        Validations.of(role).acknowledge(
            Acknowledgment(
                id="AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:glue:<AWS::Region>:"
                f"<AWS::AccountId>:table/{self.database_name}/*]",
                reason="Tables are created by the job at run time; the wildcard covers "
                "tables of this instance's database only.",
            )
        )
