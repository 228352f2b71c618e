"""Executors write a batch's data files; the driver only collects their descriptions.

:func:`file_writer` returns the function ``mapInArrow`` runs in each task: it
turns the task's rows into Parquet files laid out as the table wants them (one
file per day of event time in that task, at the table's location, with
Iceberg's column ids and statistics) and yields one row per file: the pickled
``DataFile`` (what a commit needs: path, partition, size, counts, bounds) and
its record count. Nothing is visible to readers until the driver commits those
descriptions as one snapshot (:mod:`app.sinks.iceberg_commit`); the files of an
attempt that dies before the commit are unreferenced orphans, removed by the
orphan-file optimizer (AWS) or ``python -m local maintain`` (locally).

pyiceberg is pinned (requirements) because this uses its file-writing path
below the public ``Table.append``: that API writes on the caller, which would
move every byte of the batch through the driver.
"""

from __future__ import annotations

import pickle
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

# One row per written file, back to the driver.
RESULT_SCHEMA: Final = "data_file binary, records long"


def _naive_utc(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Spark hands timestamps as ``timestamp[us, tz=UTC]`` (the session zone is
    UTC); the table's columns are Iceberg ``timestamp`` holding UTC instants,
    so the zone is dropped, never the value shifted."""
    import pyarrow as pa

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
    import pyarrow as pa
    from pyiceberg.io import load_file_io
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.table.metadata import TableMetadataUtil

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


def file_writer(
    table: Table, io_properties: Mapping[str, str]
) -> Callable[[Iterable[pa.RecordBatch]], Iterable[pa.RecordBatch]]:
    """The ``mapInArrow`` function for this table (metadata travels as JSON:
    small, and the executors need no catalog access at all)."""
    metadata_json = table.metadata.model_dump_json()
    props = dict(io_properties)

    def write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        files = write_data_files(metadata_json, props, batches)
        yield pa.RecordBatch.from_pydict(
            {
                "data_file": [pickle.dumps(f) for f in files],
                "records": [int(f.record_count) for f in files],
            },
            schema=pa.schema([("data_file", pa.binary()), ("records", pa.int64())]),
        )

    return write


def data_files_of(rows: Iterable[Any]) -> list[DataFile]:
    """The driver's side: the collected rows back to ``DataFile`` objects."""
    return [pickle.loads(bytes(row["data_file"])) for row in rows]
