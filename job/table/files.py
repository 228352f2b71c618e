"""Executors write a batch's data files; the driver only collects their descriptions.

:func:`write_data_files` runs in each task of the batch's pass
(:mod:`job.sinks.batch_task`): it turns the task's rows into Parquet files laid
out as the table wants them (one file per day of event time in that task, at
the table's location, with Iceberg's column ids and statistics) and returns
their ``DataFile`` descriptions (what a commit needs: path, partition, size,
counts, bounds), which travel back to the driver pickled. Nothing is visible
to readers until the driver commits those descriptions as one snapshot
(:mod:`job.table.commit`); the files of an attempt that dies before
the commit are unreferenced orphans, removed by the orphan-file optimizer
(AWS) or ``make maintain`` (locally).

pyiceberg is pinned (requirements) because this uses its file-writing path
below the public ``Table.append``: that API writes on the caller, which would
move every byte of the batch through the driver.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import pyarrow as pa
from pyiceberg.io import load_file_io
from pyiceberg.io.pyarrow import _dataframe_to_data_files
from pyiceberg.manifest import DataFile
from pyiceberg.table.metadata import TableMetadataUtil


def _naive_utc(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Spark hands timestamps as ``timestamp[us, tz=UTC]`` (the session zone is
    UTC); the table's columns are Iceberg ``timestamp`` holding UTC instants,
    so the zone is dropped, never the value shifted."""
    columns = []
    fields = []
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if pa.types.is_timestamp(field.type) and field.type.tz is not None:
            naive = column.cast(pa.timestamp(field.type.unit))
            columns.append(naive)
            fields.append(pa.field(field.name, naive.type, field.nullable))
        else:
            columns.append(column)
            fields.append(field)
    return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))


def write_data_files(
    metadata_json: str, io_properties: Mapping[str, str], batches: Iterable[pa.RecordBatch]
) -> list[DataFile]:
    """The data files for these rows (none for no rows)."""
    arrow = [_naive_utc(b) for b in batches if b.num_rows]
    if not arrow:
        return []
    metadata = TableMetadataUtil.parse_raw(metadata_json)
    io = load_file_io(properties=dict(io_properties), location=metadata.location)
    return list(
        _dataframe_to_data_files(
            table_metadata=metadata,
            df=pa.Table.from_batches(arrow),
            io=io,
            write_uuid=uuid.uuid4(),
        )
    )
