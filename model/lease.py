"""Single-writer lease: only one copy of an instance's job writes to its checkpoint.

Why: two copies of one instance's job on one checkpoint corrupt it and
write every row twice. The lease is an object beside the checkpoint
(``<checkpoint>/_lease``) that only one live process can hold:

* on S3 it is written with a conditional put (``If-None-Match: *`` to create,
  ``If-Match: <etag>`` to renew or to take over an expired one), so two
  copies racing for it cannot both win. It carries an expiry (``ttl``) and is
  renewed every ``ttl/3`` by a background thread; a copy killed with SIGKILL
  stops renewing, and a restart waits at most ``lease_wait_sec`` (>= ttl) for
  it to expire instead of failing. A holder that cannot renew before its own
  expiry, or finds the lease taken, reports the lease lost and the job stops.
* on a local path it is an exclusive ``flock`` on the file: the kernel drops it
  the moment the holder dies, so a restart after SIGKILL acquires it at once.

The body names the holder and, when the job gave it one, the version it runs
(:mod:`model.job_version`): the supervisor compares it with its stack's step
after a rollback. A body without it (written before the field existed, or by
another tool) reads as version unknown (``None``), which never hands over.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from botocore.exceptions import ClientError

from model.polling import wait_for
from model.storage_uri import is_missing, is_s3, local_path, parse_s3_uri

log = logging.getLogger(__name__)

LEASE_NAME = "_lease"


class LeaseHeldError(RuntimeError):
    """Another live copy of the job holds the lease."""


class LeaseLostError(RuntimeError):
    """The lease could not be renewed or was taken over: stop writing."""


def lease_path(checkpoint_location: str) -> str:
    return checkpoint_location.rstrip("/") + "/" + LEASE_NAME


def owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def lease_body(owner: str, instance: str, version: str | None) -> dict[str, Any]:
    """Who holds the lease, and the version it runs when known."""
    body: dict[str, Any] = {"owner": owner, "instance": instance}
    if version is not None:
        body["version"] = version
    return body


class Lease(Protocol):
    owner: str

    def acquire(self, wait_sec: float) -> None: ...

    def renew(self) -> None: ...

    def release(self) -> None: ...

    @property
    def renew_interval_sec(self) -> float | None: ...


class WaitLog:
    """Says, while a start waits for a held lease, who holds it and how long the
    wait may still last: once at once, then every ``every_sec``. Replacing a
    cluster is the common case (the old job holds the lease until it stops;
    docs/deploy.md, "Replacing the cluster"), and a silent wait looks like a hang."""

    def __init__(self, where: str, wait_sec: float, every_sec: float = 10.0) -> None:
        self.where = where
        self.deadline = time.monotonic() + wait_sec
        self.every_sec = every_sec
        self._next = 0.0

    def held(self, holder: object) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every_sec
        log.warning(
            "lease %s is held by %s; waiting at most %.0f s more for it (lease_wait_sec)",
            self.where,
            holder,
            max(0.0, self.deadline - now),
        )


@dataclass
class FileLease:
    """Local lease: ``flock`` held for the life of the process."""

    path: Path
    instance: str
    owner: str
    poll_sec: float = 0.2
    version: str | None = None  # model.job_version: what the holder runs
    _fd: int | None = None

    @property
    def renew_interval_sec(self) -> float | None:
        return None

    def acquire(self, wait_sec: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        waiting = WaitLog(str(self.path), wait_sec)

        def locked() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                waiting.held(self._read_holder())
                return False
            return True

        if not wait_for(locked, timeout=wait_sec, interval=self.poll_sec):
            holder = self._read_holder()
            os.close(fd)
            raise LeaseHeldError(
                f"another copy of the job for instance {self.instance!r} is running on "
                f"this checkpoint (lease {self.path} held by {holder}); refusing to start"
            )
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(lease_body(self.owner, self.instance, self.version)).encode())
        os.fsync(fd)
        self._fd = fd

    def _read_holder(self) -> str:
        try:
            return str(json.loads(self.path.read_text(encoding="utf-8")).get("owner", "unknown"))
        except (OSError, ValueError):
            return "unknown"

    def renew(self) -> None:
        if self._fd is None:
            raise LeaseLostError(f"lease {self.path} is not held")

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


@dataclass
class S3Lease:
    """S3 lease: conditional puts, expiry renewed by heartbeat."""

    client: Any
    bucket: str
    key: str
    instance: str
    owner: str
    ttl_sec: float
    clock: Callable[[], float] = time.time
    poll_sec: float = 1.0
    version: str | None = None  # model.job_version: what the holder runs
    _etag: str | None = None
    _expires_at: float = 0.0

    @property
    def renew_interval_sec(self) -> float | None:
        return self.ttl_sec / 3

    def _body(self) -> tuple[bytes, float]:
        expires = self.clock() + self.ttl_sec
        body = {**lease_body(self.owner, self.instance, self.version), "expires_at": expires}
        return json.dumps(body).encode(), expires

    def _put(self, **condition: str) -> bool:
        body, expires = self._body()
        try:
            reply = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body, **condition)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code")
            if status in (409, 412) or code in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise
        self._etag = reply["ETag"]
        self._expires_at = expires
        return True

    def _current(self) -> tuple[dict[str, Any], str] | None:
        try:
            reply = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as exc:
            if is_missing(exc):
                return None
            raise
        try:
            body = json.loads(reply["Body"].read())
        except ValueError:
            body = {}
        return (body if isinstance(body, dict) else {}), reply["ETag"]

    def acquire(self, wait_sec: float) -> None:
        holder: dict[str, Any] = {}
        waiting = WaitLog(f"s3://{self.bucket}/{self.key}", wait_sec)

        def acquired() -> bool:
            nonlocal holder
            if self._put(IfNoneMatch="*"):
                return True
            current = self._current()
            if current is None:
                return False
            holder, etag = current
            expired = float(holder.get("expires_at", 0)) <= self.clock()
            if expired and self._put(IfMatch=etag):
                log.warning("took over expired lease of %s", holder.get("owner", "unknown"))
                return True
            waiting.held(
                f"{holder.get('owner', 'unknown')} (expires at {holder.get('expires_at', '?')})"
            )
            return False

        if not wait_for(acquired, timeout=wait_sec, interval=self.poll_sec):
            raise LeaseHeldError(
                f"another copy of the job for instance {self.instance!r} is running on this "
                f"checkpoint (lease s3://{self.bucket}/{self.key} held by "
                f"{holder.get('owner', 'unknown')}, expires at "
                f"{holder.get('expires_at', '?')}); refusing to start"
            )

    def renew(self) -> None:
        if self._etag is None:
            raise LeaseLostError(f"lease s3://{self.bucket}/{self.key} is not held")
        if self.clock() >= self._expires_at:
            raise LeaseLostError(
                f"lease s3://{self.bucket}/{self.key} expired before it could be renewed"
            )
        if not self._put(IfMatch=self._etag):
            raise LeaseLostError(f"lease s3://{self.bucket}/{self.key} was taken by another copy")

    def release(self) -> None:
        current = self._current()
        if current is not None and current[1] == self._etag:
            self.client.delete_object(Bucket=self.bucket, Key=self.key)
        self._etag = None


def make_lease(
    checkpoint_location: str,
    instance: str,
    ttl_sec: float,
    s3_client: Any = None,
    *,
    version: str | None = None,
) -> Lease:
    """The lease beside ``checkpoint_location``; ``version`` is what the
    holder runs (:func:`model.job_version.version_of`), None when unknown."""
    path = lease_path(checkpoint_location)
    if is_s3(path):
        bucket, key = parse_s3_uri(path)
        return S3Lease(s3_client, bucket, key, instance, owner_id(), ttl_sec, version=version)
    return FileLease(Path(local_path(path)), instance, owner_id(), version=version)


class LeaseKeeper:
    """Renews a lease in the background; ``lost`` is set (with ``reason``) when
    renewal fails for good. Transient errors are retried until the lease's own
    expiry makes renewal impossible."""

    def __init__(self, lease: Lease) -> None:
        self.lease = lease
        self.lost = threading.Event()
        self.reason = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        interval = self.lease.renew_interval_sec
        if interval is None:
            return
        self._thread = threading.Thread(
            target=self._run, args=(interval,), name="lease-keeper", daemon=True
        )
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.lease.renew()
            except LeaseLostError as exc:
                self.reason = str(exc)
                self.lost.set()
                return
            except Exception as exc:  # transient (network): retry next tick
                log.warning("lease renewal failed, will retry: %s: %s", type(exc).__name__, exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


# --------------------------------------------------------------------------- read from outside
# Whether a live copy holds the lease, as someone other than the holder sees it
# (make status, make stop-job, the supervisor and the local harness).


@dataclass(frozen=True)
class JobState:
    running: bool
    lease: str
    holder: str | None = None  # "host:pid" of the holder, when known
    expires_at: float | None = None  # S3 lease: epoch seconds
    version: str | None = None  # what the holder runs (model.job_version); None: unknown

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


def _version(holder: dict[str, Any]) -> str | None:
    """The holder's version; None (unknown) for a body without one or with
    anything but a non-empty string there."""
    version = holder.get("version")
    return version if isinstance(version, str) and version else None


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
    return JobState(expires > now, lease, owner, expires, _version(holder))


def file_lease_state(path: Path) -> JobState:
    """Probe the local lease's ``flock`` without holding it."""
    if not path.exists():
        return JobState(False, str(path))
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            body = _holder(path.read_bytes())
            holder = body.get("owner")
            return JobState(True, str(path), str(holder) if holder else None, None, _version(body))
        fcntl.flock(fd, fcntl.LOCK_UN)
        return JobState(False, str(path))
    finally:
        os.close(fd)
