"""Counting the shuffles an action really ran (tests and benchmarks share it)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final

JOB_DESCRIPTION: Final = "spark.job.description"


def shuffles_of(spark: Any, action: Callable[[], object]) -> int:
    """How many shuffles ``action`` ran: the completed stages of its jobs that
    wrote shuffle output. A stage skipped because its output was cached or
    reused is not counted; a cached frame's plan still PRINTS its Exchange in
    every execution that reads the cache, which is why plans are not the
    measure here.

    Spark's status store is written by a listener on the asynchronous listener
    bus: when ``action`` returns the store may still miss a stage, so the bus is
    drained first. The jobs are picked by a unique job description set around
    ``action``, not by position in the store: a position counts whatever else
    ran meanwhile and shifts when the store drops old entries.
    """
    tag = f"shuffles-of-{uuid.uuid4().hex}"
    context = spark.sparkContext
    previous = context.getLocalProperty(JOB_DESCRIPTION)
    context.setLocalProperty(JOB_DESCRIPTION, tag)
    try:
        action()
    finally:
        context.setLocalProperty(JOB_DESCRIPTION, previous)
    jvm_context = spark._jsparkSession.sparkContext()
    jvm_context.listenerBus().waitUntilEmpty(60_000)  # ms; raises past it
    store = jvm_context.statusStore()
    jobs = store.jobsList(None)
    stage_ids: set[int] = set()
    tagged = 0
    for index in range(jobs.size()):
        job = jobs.apply(index)
        description = job.description()
        if not description.isDefined() or description.get() != tag:
            continue
        tagged += 1
        if str(job.status()) == "RUNNING":
            raise RuntimeError(f"job {job.jobId()} still runs: its stages cannot be counted")
        ids = job.stageIds()
        stage_ids.update(int(ids.apply(i)) for i in range(ids.size()))
    if not tagged:
        raise RuntimeError(f"no Spark job ran under {tag}: nothing to count")
    shuffles = 0
    for stage_id in sorted(stage_ids):
        try:
            stage = store.lastStageAttempt(stage_id)
        except Exception:  # a skipped stage never ran an attempt
            continue
        if str(stage.status()) == "COMPLETE" and int(stage.shuffleWriteRecords()) > 0:
            shuffles += 1
    return shuffles
