"""The job as it ran before the timer de-duplication: ``python -m tests.e2e.old_dedup_job``.

The same ``job.driver.main`` (lease, source, sinks, lifecycle), with the plan the
job used before (``dropDuplicatesWithinWatermark``, ``bench.dedup.builtin_prepare``)
and without the start-up check that refuses that plan's checkpoint: what an
instance deployed before the change ran, so that the end-to-end test can make
a real old-style checkpoint whose records already landed.
"""

from __future__ import annotations

import sys
from typing import Any

from bench.dedup import builtin_prepare
from job import driver as job
from job import query
from model.checkpoint_state import CheckpointState, inspect_checkpoint
from model.config import JobConfig


def old_prepare(raw: Any, config: JobConfig, *, seed: Any = None) -> Any:
    return builtin_prepare(raw, config)


def unchecked(config: JobConfig, s3_client: Any) -> CheckpointState:
    return inspect_checkpoint(config.checkpoint_location, s3_client)


if __name__ == "__main__":
    query.prepare = old_prepare
    job.checked_checkpoint = unchecked
    sys.exit(job.main(sys.argv[1:]))
