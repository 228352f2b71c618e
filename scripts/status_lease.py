"""Is the instance's job running? Its single-writer lease says so.

Every running copy of the job holds the lease beside its checkpoint
(:mod:`app.lease`), so the lease answers "is it running" the same way locally
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

import fcntl
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.config import JobConfig
from app.lease import lease_path
from app.storage_uri import is_s3, local_path, parse_s3_uri


@dataclass(frozen=True)
class JobState:
    running: bool
    lease: str
    holder: str | None = None  # "host:pid" of the holder, when known
    expires_at: float | None = None  # S3 lease: epoch seconds

    @property
    def local_pid(self) -> int | None:
        """The holder's pid when it runs on this host (its process can be watched)."""
        if self.holder is None:
            return None
        host, _, pid = self.holder.rpartition(":")
        if host != socket.gethostname() or not pid.isdigit():
            return None
        return int(pid)

    def line(self) -> str:
        if self.running:
            return f"running (lease {self.lease} held by {self.holder or 'unknown'})"
        return f"not running (lease {self.lease} free)"


def _holder(raw: bytes | str) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def s3_lease_state(lease: str, body: bytes | None, now: float) -> JobState:
    """The job's state from the S3 lease object (None: no object). Pure."""
    if body is None:
        return JobState(False, lease)
    holder = _holder(body)
    try:
        expires = float(holder.get("expires_at", 0))
    except (TypeError, ValueError):
        expires = 0.0
    owner = str(holder.get("owner", "unknown"))
    return JobState(expires > now, lease, owner, expires)


def file_lease_state(path: Path) -> JobState:
    """Probe the local lease's ``flock`` without holding it."""
    if not path.exists():
        return JobState(False, str(path))
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(path.read_bytes()).get("owner")
            return JobState(True, str(path), str(holder) if holder else None)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return JobState(False, str(path))
    finally:
        os.close(fd)


def job_state(config: JobConfig, s3: Any, now: float) -> JobState:
    """Whether a copy of the job holds the instance's lease right now."""
    where = lease_path(config.checkpoint_location)
    if not is_s3(where):
        return file_lease_state(Path(local_path(where)))
    bucket, key = parse_s3_uri(where)
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        body = None
    return s3_lease_state(where, body, now)


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
