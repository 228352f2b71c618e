"""Is the instance's job running? Its single-writer lease says so.

Every running copy of the job holds the lease beside its checkpoint
(:mod:`model.lease`), so the lease answers "is it running" the same way locally
and on EMR, without YARN or the EMR step (the step ends once YARN accepted
the application: ``spark.yarn.submit.waitAppCompletion=false``):

* local checkpoint: the lease file carries an ``flock`` for the life of the
  holder. A shared, non-blocking ``flock`` that fails means a live holder; one
  that succeeds is dropped at once. The file names the holder (``host:pid``),
  so on this host the process itself can be watched too;
* S3 checkpoint: the lease object exists while a holder renews it; its
  ``expires_at`` says whether the holder is still alive (a killed job's lease
  expires after ``lease_ttl_sec``). The job deletes it on a clean exit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from model.config import JobConfig
from model.lease import JobState, file_lease_state, lease_path, s3_lease_state
from model.storage_uri import is_s3, local_path, read_object_if_present

# The lease's state as seen from outside lives in model.lease (the supervisor's
# Lambda reads it there too); re-exported for the operator commands.
__all__ = ["JobState", "file_lease_state", "job_state", "process_alive", "s3_lease_state"]


def job_state(config: JobConfig, s3: Any, now: float) -> JobState:
    """Whether a copy of the job holds the instance's lease right now."""
    where = lease_path(config.checkpoint_location)
    if not is_s3(where):
        return file_lease_state(Path(local_path(where)))
    return s3_lease_state(where, read_object_if_present(where, s3), now)


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs. Signal 0 checks existence without signalling; a
    zombie (exited, not yet reaped by its parent, e.g. the ``make run`` process
    that started the job) has exited, which ``/proc/<pid>/stat`` shows as ``Z``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return True  # no procfs (not Linux): existence is all we can know
    fields = stat.rsplit(")", 1)[-1].split()
    return not fields or fields[0] != "Z"
