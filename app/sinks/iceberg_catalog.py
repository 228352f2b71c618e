"""The events table in its catalog: open the catalog, check the table at start.

Same code on EMR and locally: pyiceberg's ``GlueCatalog`` (the instance's own
Glue database, which the stack created with the table) or its ``SqlCatalog``
(SQLite; warehouse on the local file system or moto S3). Spark never sees the
table: the job's Spark session keeps the Hive catalog (docs/design.md,
"Incidents"), and the table is written by :mod:`app.sinks.iceberg_files` and
committed by :mod:`app.sinks.iceberg_commit`.

At start, :func:`ensure_table` checks that the table's columns are the event
contract's (:mod:`app.table_layout`) and stops the job with a
:class:`~app.config.ConfigError` (exit code 2) naming the table, the column,
what was found and what was expected when they are not. Every catalog call is
retried a bounded number of times (:func:`with_retries`); a catalog that stays
unreachable fails the batch, so its offsets are not committed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from app import aws_clients
from app.config import CatalogOptions, ConfigError, EventField, JobConfig, TableMaintenance
from app.table_layout import (
    PARTITION_TRANSFORM,
    ColumnType,
    partition_column,
    partition_field_name,
    table_columns,
)

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table

log = logging.getLogger(__name__)

T = TypeVar("T")

# Glue calls: a bounded wait each; the retries are ours (with_retries).
GLUE_CATALOG: Final = aws_clients.ClientLimits(
    connect_timeout_sec=5, read_timeout_sec=20, retries=2
)

# The table property that records the last batch this job committed:
# ``<query id>:<batch id>``. Written in the same commit as the batch's files,
# so reading it is enough to know whether a replayed batch already landed
# (no walk over the snapshot history, which expiry and Glue's compaction
# snapshots would make unreliable anyway).
COMMITTED_PROPERTY: Final = "streaming.committed-batch"
# Iceberg's own streaming sink puts these in each snapshot's summary; readers
# and audits use them to find which batch made a snapshot.
QUERY_ID_SUMMARY: Final = "spark.sql.streaming.queryId"
BATCH_ID_SUMMARY: Final = "spark.sql.streaming.epochId"


def table_properties(maintenance: TableMaintenance) -> dict[str, str]:
    """Iceberg table properties the job keeps set (names from
    https://iceberg.apache.org/docs/latest/configuration/#table-properties)."""
    return {
        "format-version": "2",
        "write.format.default": "parquet",
        "write.parquet.compression-codec": "zstd",
        # Merge small manifests on append, so the manifest list of a snapshot
        # stays short however many batches were committed.
        "commit.manifest-merge.enabled": "true",
        "commit.manifest.min-count-to-merge": str(maintenance.manifests_to_merge),
        # Old metadata.json files are deleted after each commit.
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": str(maintenance.metadata_versions_kept),
        # A commit that lost a race (a Glue compaction committed first) is
        # retried on the refreshed table, a bounded number of times.
        "commit.retry.num-retries": "5",
        "commit.retry.min-wait-ms": "100",
        "commit.retry.max-wait-ms": "5000",
        "commit.retry.total-timeout-ms": "60000",
    }


def _iceberg_type(kind: ColumnType) -> Any:
    from pyiceberg import types

    return {
        "string": types.StringType(),
        "long": types.LongType(),
        "double": types.DoubleType(),
        "boolean": types.BooleanType(),
        "timestamp": types.TimestampType(),
    }[kind]


def iceberg_schema(fields: Sequence[EventField]) -> Schema:
    """The table's schema: every column optional (a missing optional event
    field is a null, and Spark's Arrow batches are nullable throughout)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    return Schema(
        *(
            NestedField(field_id=i, name=col.name, field_type=_iceberg_type(col.type))
            for i, col in enumerate(table_columns(fields), start=1)
        )
    )


def partition_spec(schema: Schema, event_time_field: str) -> PartitionSpec:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import DayTransform

    source = schema.find_field(partition_column(event_time_field))
    return PartitionSpec(
        PartitionField(
            source_id=source.field_id,
            field_id=1000,
            transform=DayTransform(),
            name=partition_field_name(event_time_field),
        )
    )


def schema_problems(table_name: str, found: Schema, fields: Sequence[EventField]) -> list[str]:
    """One line per column that differs from the contract (empty: it matches).
    Names are compared exactly; types by Iceberg's type name."""
    expected = {col.name: str(_iceberg_type(col.type)) for col in table_columns(fields)}
    actual = {f.name: str(f.field_type) for f in found.fields}
    lines: list[str] = []
    for name, kind in expected.items():
        if name not in actual:
            lines.append(f"table {table_name}: column {name!r} is missing; expected {kind}")
        elif actual[name] != kind:
            lines.append(f"table {table_name}: column {name!r} is {actual[name]}; expected {kind}")
    for name in actual.keys() - expected.keys():
        lines.append(
            f"table {table_name}: column {name!r} ({actual[name]}) is not an event column; "
            f"expected only {', '.join(expected)}"
        )
    return lines


def spec_problems(table_name: str, table: Table, event_time_field: str) -> list[str]:
    spec = table.spec()
    wanted = f"{PARTITION_TRANSFORM}({partition_column(event_time_field)})"
    fields = [f"{f.transform}({table.schema().find_column_name(f.source_id)})" for f in spec.fields]
    if fields == [wanted]:
        return []
    return [
        f"table {table_name}: partitioned by [{', '.join(fields)}]; expected [{wanted}] "
        "(a table made by hand? recreate it, or let the job create it)"
    ]


def is_transient(exc: BaseException) -> bool:
    """A catalog error worth retrying: the network, a throttle, a busy SQLite
    file. A missing table or a rejected commit is not."""
    name = type(exc).__name__
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    return name in {
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ReadTimeoutError",
        "ConnectionClosedError",
        "OperationalError",  # SQLAlchemy: database is locked / unreachable
        "ThrottlingException",
    } or (
        name == "ClientError"
        and getattr(exc, "response", {}).get("Error", {}).get("Code")
        in {"ThrottlingException", "InternalServiceException", "ServiceUnavailable"}
    )


def with_retries(
    action: Callable[[], T],
    what: str,
    options: CatalogOptions,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``action()``, retried on transient errors at most ``options.max_attempts``
    times in all, waiting ``retry_wait_sec`` doubled each time. The last error
    propagates (the batch fails and is replayed from the same offsets)."""
    for attempt in range(1, options.max_attempts + 1):
        try:
            return action()
        except Exception as exc:
            if attempt == options.max_attempts or not is_transient(exc):
                raise
            wait = options.retry_wait_sec * 2 ** (attempt - 1)
            log.warning(
                "%s failed (attempt %d of %d), retrying in %.1fs: %s",
                what,
                attempt,
                options.max_attempts,
                wait,
                exc,
            )
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


def file_io_properties(config: JobConfig) -> dict[str, str]:
    """What a FileIO needs to reach the warehouse, on the driver and on
    executors (no credentials: pyarrow's S3 client finds the instance
    profile's on EMR and the environment's locally)."""
    props = {"s3.region": config.region}
    endpoint = config.catalog.endpoint_url or config.s3_endpoint_url
    if endpoint:
        props["s3.endpoint"] = endpoint
        props["s3.force-virtual-addressing"] = "false"
    return props


def open_catalog(config: JobConfig) -> Catalog:
    options = config.catalog
    props: dict[str, str] = file_io_properties(config)
    if options.type == "sql":
        from pyiceberg.catalog.sql import SqlCatalog

        assert options.uri is not None and options.warehouse is not None
        return SqlCatalog("local", uri=options.uri, warehouse=options.warehouse, **props)
    from pyiceberg.catalog.glue import GlueCatalog

    glue = aws_clients.client(
        "glue", GLUE_CATALOG, region=config.region, endpoint_url=options.endpoint_url
    )
    return GlueCatalog("glue", client=glue, **props)


def _create_local(catalog: Catalog, config: JobConfig) -> Table:
    """Locally the job creates its namespace and table (on AWS the stack did)."""
    schema = iceberg_schema(config.event_fields)
    catalog.create_namespace_if_not_exists(config.database)
    location = None
    if config.database_location:
        location = config.database_location.rstrip("/") + "/" + config.table
    return catalog.create_table_if_not_exists(
        (config.database, config.table),
        schema=schema,
        partition_spec=partition_spec(schema, config.event_time_field),
        location=location,
        properties=table_properties(config.table_maintenance),
    )


def _adopt_empty_table(table: Table, config: JobConfig) -> Table:
    """A table that has never been written and is unpartitioned (the stack's
    CloudFormation table: its Iceberg input declares no partition spec) gets
    the day partition before its first data file."""
    if table.spec().fields or table.current_snapshot() is not None:
        return table
    source = partition_column(config.event_time_field)
    with table.update_spec() as update:
        update.add_field(source, _day(), partition_field_name(config.event_time_field))
    log.info("table %s: partitioned by day(%s) before its first write", table.name(), source)
    return table


def _day() -> Any:
    from pyiceberg.transforms import DayTransform

    return DayTransform()


def _missing_properties(table: Table, wanted: Mapping[str, str]) -> dict[str, str]:
    have = table.properties
    return {k: v for k, v in wanted.items() if k != "format-version" and have.get(k) != v}


def ensure_table(config: JobConfig, catalog: Catalog | None = None) -> Table:
    """The events table, checked against the contract, with the job's table
    properties set. Raises :class:`ConfigError` (exit code 2) when it cannot be
    used as is; catalog outages are retried (:func:`with_retries`)."""
    from pyiceberg.exceptions import NoSuchTableError

    name = f"{config.database}.{config.table}"
    opened = catalog or with_retries(lambda: open_catalog(config), "open catalog", config.catalog)
    if config.catalog.type == "sql":
        table = with_retries(
            lambda: _create_local(opened, config), f"create table {name}", config.catalog
        )
    else:
        try:
            table = with_retries(
                lambda: opened.load_table((config.database, config.table)),
                f"load table {name}",
                config.catalog,
            )
        except NoSuchTableError as exc:
            raise ConfigError(
                f"table {name}: not found in the Glue catalog; the instance's stack creates "
                "it (cdk deploy), the job does not"
            ) from exc
    problems = schema_problems(name, table.schema(), config.event_fields)
    if problems:
        raise ConfigError("\n".join(problems))
    table = _adopt_empty_table(table, config)
    problems = spec_problems(name, table, config.event_time_field)
    if problems:
        raise ConfigError("\n".join(problems))
    missing = _missing_properties(table, table_properties(config.table_maintenance))
    if missing:
        with table.transaction() as tx:
            tx.set_properties(missing)
        log.info("table %s: set properties %s", name, sorted(missing))
    return table
