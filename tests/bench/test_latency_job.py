"""bench/latency_job.py: the job's per-batch split read from its own log line."""

from __future__ import annotations

import logging

from bench.latency_job import JobSplit
from job import micro_batch

# job.micro_batch's per-batch line, as it logs it.
LINE = (
    "batch %d: %d records, %d failures, dates %s, %d rows in %d files%s; %.2fs "
    "(pass %.2fs, commit %.2fs)"
)


def test_the_split_of_each_batch_is_read_from_the_job_s_log() -> None:
    log = logging.getLogger(micro_batch.__name__)
    with JobSplit().attached() as split:
        log.info(LINE, 4, 100, 2, "2024-01-01", 98, 1, "", 1.5, 1.0, 0.5)
        log.info("batch %d: something else %s", 5, "x")

    assert split.seconds == {4: {"total": 1.5, "pass": 1.0, "commit": 0.5}}
    assert split not in log.handlers


def test_a_line_of_another_shape_costs_the_figure_not_the_run() -> None:
    split = JobSplit()
    record = logging.LogRecord("x", logging.INFO, "f", 1, LINE, (4, "many", 1.0), None)
    split.emit(record)
    odd = logging.LogRecord("x", logging.INFO, "f", 1, "batch %d: %s; %.2fs", (4, "a", "b"), None)
    split.emit(odd)

    assert split.seconds == {}
