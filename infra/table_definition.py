"""The events table's definition, without CDK: what the stack creates it from,
the fingerprint that pins it, and the pinned names of its resources.

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
(job.table.evolution), once synth has checked they are additive
(infra.schema_change). An instance with fields of its own pins its table's
definition in ``table_definition_sha256``, the others share
:data:`DEPLOYED_DEFINITION_SHA256`.

Pure data and functions: importable and unit-tested without synthesizing
anything. The construct that builds the resources from them is
:mod:`infra.constructs.events_table`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from typing import Any, Final, Literal

from model.config import EventField
from model.contract import EVENTS_TABLE
from model.table_layout import seed_columns

# A new logical ID would replace the table: create-before-delete of a table
# with the same name fails, and the data's catalog entry with it.
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
# schema (model.config.DEFAULT_EVENT_FIELDS) created its table with
# (:func:`definition_fingerprint`); an instance with event fields of its own
# pins its own (InstanceConfig.table_definition_sha256). Change it only
# together with the migration in docs/infra.md ("Changing the events table").
DEPLOYED_DEFINITION_SHA256: Final = (
    "27a67857cf2468c798610c663878595bf1224fa0cbea1e904c5d070701e3dc99"
)


# Where the data bucket keeps a Glue database's tables (``Buckets.database_prefix``;
# tests/infra/test_table_definition.py holds the two equal).
WAREHOUSE_PREFIX: Final = "warehouse/"
# How many candidate seeds :func:`pinned_seed_fields` fingerprints at most
# (every subset of 12 optional fields).
MAX_SEED_CANDIDATES: Final = 4096


class TableDefinitionChangedError(ValueError):
    """The events table's CloudFormation definition is not the deployed one."""


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
    (:func:`model.table_layout.seed_columns`): columns added to the contract later
    reach every table, new or deployed, through the job (job.table.evolution),
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


def database_prefix(database_name: str) -> str:
    """The key prefix of a Glue database in the instance's data bucket."""
    return f"{WAREHOUSE_PREFIX}{database_name}.db/"


def pinned_seed_fields(
    declared: Sequence[EventField], pin: str, database_name: str
) -> tuple[EventField, ...] | None:
    """The event fields a pinned table was created with, read back from the
    pin itself: ``declared`` less the optional fields added since, i.e. the
    subset of ``declared`` (fewest fields removed first, only optional ones)
    whose definition's fingerprint is ``pin``. So a pin (``table_definition_sha256``)
    carries what the next additive change needs: appending or inserting an
    optional field to a pinned instance keeps its table's definition, with no
    ``table_seed`` to write. None when no candidate matches (a widened type, a
    required field made optional: those need ``table_seed``) or there are more
    than :data:`MAX_SEED_CANDIDATES`. Pure: a SHA-256 per candidate."""
    prefix = database_prefix(database_name)
    optional = [index for index, field in enumerate(declared) if not field.required]
    tried = 0
    for removed in range(len(optional) + 1):
        for dropped in itertools.combinations(optional, removed):
            tried += 1
            if tried > MAX_SEED_CANDIDATES:
                return None
            fields = tuple(f for index, f in enumerate(declared) if index not in dropped)
            if definition_fingerprint(fields, database_name, prefix) == pin:
                return fields
    return None


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
    if found != pinned:
        raise TableDefinitionChangedError(
            changed_definition_message(fields, database_name, found, deployed)
        )


def changed_definition_message(
    fields: Sequence[EventField], database_name: str, found: str, deployed: str | None
) -> str:
    """What :func:`check_definition` says: the two fingerprints, the seed's
    columns, and the way out for a table not deployed yet, one whose fields
    only grew, and one whose definition really changed."""
    pinned = DEPLOYED_DEFINITION_SHA256 if deployed is None else deployed
    columns = ", ".join(f"{c.name} {c.glue_type}" for c in seed_columns(fields))
    source = (
        "the default event schema's (DEPLOYED_DEFINITION_SHA256)"
        if deployed is None
        else "the instance's table_definition_sha256"
    )
    return (
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


def optimizer_writes(kind: OptimizerType) -> bool:
    """Whether an optimizer rewrites the table (``glue:UpdateTable``,
    ``s3:PutObject``): compaction and retention do, orphan-file deletion only
    deletes (https://docs.aws.amazon.com/glue/latest/dg/optimization-prerequisites.html)."""
    return kind != "orphan_file_deletion"


def optimizer_object_actions(kind: OptimizerType) -> list[str]:
    """The S3 actions an optimizer's role has on the table's objects."""
    return [
        "s3:GetObject",
        "s3:DeleteObject",
        *(["s3:PutObject"] if optimizer_writes(kind) else []),
    ]


def optimizer_table_actions(kind: OptimizerType) -> list[str]:
    """The Glue actions an optimizer's role has on the table (and its
    database and catalog, which ``GetTable`` needs)."""
    return ["glue:GetTable", *(["glue:UpdateTable"] if optimizer_writes(kind) else [])]


# An optimizer writes its runs to its log group.
OPTIMIZER_LOG_ACTIONS: Final = ("logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents")
