"""The table properties the job keeps set (model.table_properties): the fixed
ones, the two the instance's table_maintenance sets, and what a start adds."""

from __future__ import annotations

from model.config import TableMaintenance
from model.table_properties import FIXED_PROPERTIES, missing_properties, table_properties


def test_the_instance_sets_manifest_merging_and_metadata_versions() -> None:
    wanted = table_properties(TableMaintenance(manifests_to_merge=7, metadata_versions_kept=3))
    assert wanted["commit.manifest.min-count-to-merge"] == "7"
    assert wanted["write.metadata.previous-versions-max"] == "3"
    assert {k: wanted[k] for k in FIXED_PROPERTIES} == dict(FIXED_PROPERTIES)
    assert len(wanted) == len(FIXED_PROPERTIES) + 2


def test_a_start_sets_what_is_missing_or_different_never_the_format_version() -> None:
    wanted = table_properties(TableMaintenance())
    have = {
        **wanted,
        "format-version": "1",  # the table's own: never set afterwards
        "write.parquet.compression-codec": "snappy",  # changed by hand
        "owner": "someone",  # not ours: left alone
    }
    del have["commit.retry.num-retries"]
    assert missing_properties(have, wanted) == {
        "write.parquet.compression-codec": "zstd",
        "commit.retry.num-retries": "5",
    }


def test_a_table_that_has_every_property_needs_nothing() -> None:
    wanted = table_properties(TableMaintenance())
    assert missing_properties(wanted, wanted) == {}
    assert missing_properties({}, wanted) == {
        k: v for k, v in wanted.items() if k != "format-version"
    }
