"""The Iceberg table properties the job keeps set on the events table.

Set when the job creates the table (locally) and, at every start, on a table
that lacks them or holds other values (:func:`job.table.catalog.ensure_table`):
the stack's CloudFormation table arrives without any. Names from
https://iceberg.apache.org/docs/latest/configuration/#table-properties.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from model.config import TableMaintenance

# What no setting changes.
FIXED_PROPERTIES: Final[Mapping[str, str]] = {
    "format-version": "2",
    "write.format.default": "parquet",
    "write.parquet.compression-codec": "zstd",
    # Merge small manifests on append, so the manifest list of a snapshot
    # stays short however many batches were committed.
    "commit.manifest-merge.enabled": "true",
    # Old metadata.json files are deleted after each commit.
    "write.metadata.delete-after-commit.enabled": "true",
    # A commit that lost a race (a Glue compaction committed first) is
    # retried on the refreshed table, a bounded number of times.
    "commit.retry.num-retries": "5",
    "commit.retry.min-wait-ms": "100",
    "commit.retry.max-wait-ms": "5000",
    "commit.retry.total-timeout-ms": "60000",
}


def table_properties(maintenance: TableMaintenance) -> dict[str, str]:
    """Every property the job wants on the table: the fixed ones and those
    the instance's ``table_maintenance`` sets."""
    return {
        **FIXED_PROPERTIES,
        "commit.manifest.min-count-to-merge": str(maintenance.manifests_to_merge),
        "write.metadata.previous-versions-max": str(maintenance.metadata_versions_kept),
    }


def missing_properties(have: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str]:
    """The wanted properties ``have`` lacks or holds otherwise (the format
    version is the table's own and is never set afterwards)."""
    return {k: v for k, v in wanted.items() if k != "format-version" and have.get(k) != v}
