"""The events table: created if absent, appended to idempotently.

How a batch write stays exactly-once (the mechanism the kill tests rely on)
--------------------------------------------------------------------------
The table is append-only and keyed by event id: a row is written only if its
id is not in the table yet. Each batch:

0. deletes what an abandoned attempt left under the table root
   (``_temporary``, ``.spark-staging-*``): Hadoop's commit protocol merges
   EVERY task directory under ``_temporary/0`` at job commit, so a killed
   attempt's committed tasks would otherwise be merged, unfiltered, by the next
   write (the lease guarantees no other write is in flight);
1. registers the date partitions it is about to touch
   (``ALTER TABLE ADD IF NOT EXISTS PARTITION``), so files a crashed attempt
   committed before it could register its partition become visible;
2. reads the ids already stored in those partitions (partition-pruned to the
   dates in the batch; a re-sent event carries the same ``occurredAt`` and
   therefore lands in the same partition);
3. unions them with the batch's valid rows and reduces by id in ONE
   aggregation (:func:`app.transform.latest_per_id`): an id already stored is
   dropped, otherwise the latest version in the batch is kept;
4. appends the remaining rows.

So the unit of idempotency is the row, not the batch: if the driver dies at any
point of the write (before the commit, during it with some files renamed, or
after it but before Spark recorded the batch in the checkpoint's ``commits/``),
the replayed batch (same id, same offsets) finds the rows that made it and
writes only the others. The same holds across batches: a duplicate of an id
that arrives in a later batch is dropped, so the table never holds an id
twice (first version wins across batches, latest within a batch). A single
writer per table is guaranteed by :mod:`app.lease`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any, Final

from app.config import EventField
from app.transform import EVENT_DATE, table_columns

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# Directories a write in progress keeps under the table root until job commit.
STAGING_PREFIXES: Final = ("_temporary", ".spark-staging", ".hive-staging")


def quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def qualified(database: str, table: str) -> str:
    return f"{quote(database)}.{quote(table)}"


def create_table_sql(
    database: str, table: str, fields: Sequence[EventField], location: str | None = None
) -> str:
    """Hive DDL: Parquet, partitioned by the event's UTC date (last column)."""
    columns = table_columns(fields)
    body = ",\n  ".join(f"{quote(name)} {kind}" for name, kind in columns[:-1])
    part_name, part_kind = columns[-1]
    sql = (
        f"CREATE TABLE IF NOT EXISTS {qualified(database, table)} (\n  {body}\n)\n"
        f"PARTITIONED BY ({quote(part_name)} {part_kind})\nSTORED AS PARQUET"
    )
    if location:
        sql += f"\nLOCATION '{location}'"
    return sql


def ensure_table(
    spark: SparkSession,
    database: str,
    table: str,
    fields: Sequence[EventField],
    database_location: str | None = None,
) -> None:
    """Create the database (locally; on AWS the stack made it) and the table."""
    db_sql = f"CREATE DATABASE IF NOT EXISTS {quote(database)}"
    if database_location:
        db_sql += f" LOCATION '{database_location}'"
    spark.sql(db_sql)
    spark.sql(create_table_sql(database, table, fields))


def register_partitions(spark: SparkSession, fqn: str, dates: Iterable[date]) -> None:
    """Step 1 of the mechanism above: make every partition the batch touches
    known to the metastore before its ids are read."""
    specs = " ".join(
        f"PARTITION ({quote(EVENT_DATE)} = DATE '{d.isoformat()}')" for d in sorted(set(dates))
    )
    if specs:
        spark.sql(f"ALTER TABLE {fqn} ADD IF NOT EXISTS {specs}")


def stored_ids(spark: SparkSession, fqn: str, id_column: str, dates: Iterable[date]) -> DataFrame:
    """Ids already in the partitions of ``dates`` (pruned to those partitions)."""
    from pyspark.sql import functions as sf

    wanted = sorted(set(dates))
    frame = spark.table(fqn)
    return frame.where(sf.col(EVENT_DATE).isin(wanted)).select(id_column)


def append(rows: DataFrame, fqn: str) -> None:
    """Position-based append (columns already in table order, partition last)."""
    rows.write.insertInto(fqn, overwrite=False)


def table_location(spark: SparkSession, fqn: str) -> str:
    """The table's root directory (``s3://...`` on EMR, ``file:/...`` locally)."""
    for row in spark.sql(f"DESCRIBE TABLE EXTENDED {fqn}").collect():
        if row["col_name"] == "Location":
            return str(row["data_type"])
    raise ValueError(f"table {fqn}: the catalog reports no Location")


def discard_abandoned_writes(spark: SparkSession, location: str) -> list[str]:
    """Step 0 of the mechanism above. Uses the Hadoop file system of the table
    (EMRFS on EMR), so it works wherever the table lives."""
    session: Any = spark
    jvm = session._jvm
    root = jvm.org.apache.hadoop.fs.Path(location)
    fs = root.getFileSystem(session._jsc.hadoopConfiguration())
    if not fs.exists(root):
        return []
    removed: list[str] = []
    for status in fs.listStatus(root):
        name = str(status.getPath().getName())
        if name.startswith(STAGING_PREFIXES):
            fs.delete(status.getPath(), True)
            removed.append(name)
    if removed:
        log.warning("discarded abandoned write attempts under %s: %s", location, removed)
    return removed
