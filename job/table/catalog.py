"""The events table in its catalog: open the catalog, check the table at start.

Same code on EMR and locally: pyiceberg's ``GlueCatalog`` (the instance's own
Glue database, which the stack created with the table) or its ``SqlCatalog``
(SQLite; warehouse on the local file system or moto S3). Spark never sees the
table: the job's Spark session keeps the Hive catalog (docs/design.md,
"Incidents"), and the table is written by :mod:`job.table.files` and
committed by :mod:`job.table.commit`.

At start, :func:`ensure_table` checks that the table's columns and partitioning
are the contract's (:mod:`job.table.checks`) and stops the job with a
:class:`~model.config.ConfigError` (exit code 2) naming the table, what was found
and what was expected when they are not. Every catalog call is retried a
bounded number of times (:func:`job.retry.with_retries`); a catalog that stays
unreachable fails the batch, so its offsets are not committed.
"""

from __future__ import annotations

import logging

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.table import Table

from job.retry import with_retries
from job.table.checks import schema_problems, spec_problems
from job.table.schema import iceberg_schema, iceberg_transform, partition_spec
from model import aws_clients
from model.config import ConfigError, JobConfig
from model.table_layout import partitioning
from model.table_properties import missing_properties, table_properties

log = logging.getLogger(__name__)


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
        return _open_sql(options.uri, options.warehouse, props)
    glue = aws_clients.client(
        "glue", aws_clients.GLUE_CATALOG, region=config.region, endpoint_url=options.endpoint_url
    )
    return GlueCatalog("glue", client=glue, **props)


def _open_sql(uri: str | None, warehouse: str | None, props: dict[str, str]) -> Catalog:
    """pyiceberg's ``SqlCatalog`` creates its own tables when opened: it checks
    that they exist, then creates them. Two openers at once (the local job and
    a reader, or two threads of a test) can both pass the check, and the
    second ``CREATE`` fails with ``table iceberg_tables already exists``. The
    tables then exist, so opening again succeeds: retried once, that error
    only."""
    # optional: SQLAlchemy, which the SQL catalog needs, is local only (not in
    # job/requirements.lock, so not on EMR)
    from pyiceberg.catalog.sql import SqlCatalog  # optional: SQLAlchemy, local only
    from sqlalchemy.exc import OperationalError  # optional: SQLAlchemy, local only

    assert uri is not None and warehouse is not None
    try:
        return SqlCatalog("local", uri=uri, warehouse=warehouse, **props)
    except OperationalError as error:
        if "already exists" not in str(error):
            raise
        return SqlCatalog("local", uri=uri, warehouse=warehouse, **props)


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
        partition_spec=partition_spec(schema, partitioning(config.event_time_field)),
        location=location,
        properties=table_properties(config.table_maintenance),
    )


def _adopt_empty_table(table: Table, config: JobConfig) -> Table:
    """A table that has never been written and is unpartitioned (the stack's
    CloudFormation table: its Iceberg input declares no partition spec) gets
    the job's partitioning before its first data file."""
    if table.spec().fields or table.current_snapshot() is not None:
        return table
    wanted = partitioning(config.event_time_field)
    with table.update_spec() as update:
        update.add_field(
            wanted.source_column, iceberg_transform(wanted.transform), wanted.field_name
        )
    log.info("table %s: partitioned by %s before its first write", table.name(), wanted)
    return table


def load_table(config: JobConfig, catalog: Catalog | None = None) -> Table:
    """The events table as the catalog has it (``NoSuchTableError`` when it
    does not exist); catalog outages are retried."""
    name = f"{config.database}.{config.table}"
    opened = catalog or with_retries(lambda: open_catalog(config), "open catalog", config.catalog)
    return with_retries(
        lambda: opened.load_table((config.database, config.table)),
        f"load table {name}",
        config.catalog,
    )


def ensure_table(
    config: JobConfig, catalog: Catalog | None = None, *, loaded: Table | None = None
) -> Table:
    """The events table, checked against the contract, with the job's table
    properties set. Raises :class:`ConfigError` (exit code 2) when it cannot be
    used as is; catalog outages are retried (:func:`with_retries`).

    ``loaded``: the table as the caller already loaded it (the job's start:
    loaded once, evolved, then checked here), so it is not loaded again."""
    name = f"{config.database}.{config.table}"
    if loaded is not None:
        table = loaded
    elif config.catalog.type == "sql":
        opened = catalog or with_retries(
            lambda: open_catalog(config), "open catalog", config.catalog
        )
        table = with_retries(
            lambda: _create_local(opened, config), f"create table {name}", config.catalog
        )
    else:
        try:
            table = load_table(config, catalog)
        except NoSuchTableError as exc:
            raise ConfigError(
                f"table {name}: not found in the Glue catalog; the instance's stack creates "
                "it (cdk deploy), the job does not"
            ) from exc
    problems = schema_problems(name, table.schema(), config.event_fields)
    if problems:
        raise ConfigError("\n".join(problems))
    table = _adopt_empty_table(table, config)
    problems = spec_problems(name, table, partitioning(config.event_time_field))
    if problems:
        raise ConfigError("\n".join(problems))
    missing = missing_properties(table.properties, table_properties(config.table_maintenance))
    if missing:
        with table.transaction() as tx:
            tx.set_properties(missing)
        log.info("table %s: set properties %s", name, sorted(missing))
    return table
