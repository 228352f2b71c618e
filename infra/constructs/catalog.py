"""The instance's own Glue database (DESIGN.md §1: six domains on one
database, one hot domain slowed all). Its location is in the instance's bucket."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Aws, RemovalPolicy
from aws_cdk import aws_glue as glue
from constructs import Construct

DATABASE_LOGICAL_ID: Final = "GlueDatabase"


@dataclass(frozen=True)
class CatalogDatabaseProps:
    database_name: str
    location_uri: str
    removal_policy: RemovalPolicy


class CatalogDatabase(Construct):
    """Exposes ``database``, ``database_name`` and the ARNs IAM needs:
    ``catalog_arn``, ``database_arn`` and ``tables_arn`` (this database's tables only)."""

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
