"""The job under :mod:`bench.latency`, and what watches it: the query as
``job.query`` builds it, a reader polling the table's catalog, and the job's
own per-batch split from its log."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from bench.read_loops import Seen
from bench.stream import kafka_settings
from job import micro_batch
from job.micro_batch import BatchProcessor, prepare
from job.sources import read_stream
from job.table.catalog import ensure_table, load_table
from model.polling import poll_until
from model.table_layout import BATCH_ID_SUMMARY

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

    from model.config import JobConfig

TABLE_POLL_SEC: Final = 0.2


class TableWatcher(threading.Thread):
    """Polls the table through its catalog, as a reader would: the first time
    each batch's snapshot is visible, and the table's row count."""

    def __init__(self, config: JobConfig) -> None:
        super().__init__(name="table-watcher", daemon=True)
        self.table = load_table(config)
        self.batches = Seen()
        self.rows = 0
        self.polls = 0
        self.poll_seconds = 0.0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def poll(self) -> None:
        started = time.monotonic()
        self.table.refresh()
        now = time.monotonic()
        for snap in self.table.snapshots():
            batch = snap.summary.get(BATCH_ID_SUMMARY) if snap.summary is not None else None
            if batch is not None:
                self.batches.first(str(batch), now)
        current = self.table.current_snapshot()
        if current is not None and current.summary is not None:
            self.rows = int(current.summary.get("total-records") or 0)
        self.polls += 1
        self.poll_seconds += time.monotonic() - started

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self.poll()
                self.stop.wait(TABLE_POLL_SEC)
        except BaseException as exc:  # reported by the benchmark, not lost in a thread
            self.error = exc


class JobSplit(logging.Handler):
    """The job's own split of each batch, from its per-batch log line
    (``job.micro_batch``: ``batch %d: ... %.2fs (pass %.2fs, commit %.2fs)``);
    a line of another shape is ignored, so a reworded log costs a figure, not
    the benchmark."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seconds: dict[int, dict[str, float]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        text, args = str(record.msg), record.args
        if not text.startswith("batch %d:") or not isinstance(args, tuple) or len(args) < 4:
            return
        names = re.findall(r"(\w+) %\.2fs", text.rsplit(";", 1)[-1])
        values = args[-len(names) - 1 :] if names else ()
        if len(names) + 1 != len(values):
            return
        try:
            figures = {"total": float(str(values[0]))}
            figures.update({n: float(str(v)) for n, v in zip(names, values[1:], strict=True)})
            self.seconds[int(str(args[0]))] = figures
        except ValueError:
            return

    @contextlib.contextmanager
    def attached(self) -> Iterator[JobSplit]:
        logger = logging.getLogger(micro_batch.__name__)
        level = logger.level
        logger.setLevel(logging.INFO)
        logger.addHandler(self)
        try:
            yield self
        finally:
            logger.removeHandler(self)
            logger.setLevel(level)


def start_job_query(spark: SparkSession, config: JobConfig) -> StreamingQuery:
    """The job's query as ``job.query.run`` builds it (no lease, no metrics)."""
    processor = BatchProcessor(config, kafka_settings(config), table=ensure_table(config))
    return (
        prepare(read_stream(spark, config), config)
        .writeStream.option("checkpointLocation", config.checkpoint_location)
        .trigger(processingTime=f"{config.trigger_interval_sec} seconds")
        .foreachBatch(processor)
        .start()
    )


def wait_rows(query: StreamingQuery, watcher: TableWatcher, rows: int, timeout: float) -> None:
    """Until the table holds ``rows`` rows; a failed query or watcher ends the wait."""

    def landed() -> bool:
        failure = query.exception()
        if failure is not None:
            raise RuntimeError(f"query failed: {failure}")
        if watcher.error is not None:
            raise RuntimeError(f"table watcher failed: {watcher.error}")
        return watcher.rows >= rows

    poll_until(
        landed,
        timeout=timeout,
        interval=0.2,
        on_timeout=lambda: TimeoutError(
            f"{watcher.rows} of {rows} rows in the table after {timeout:.0f}s"
        ),
    )
