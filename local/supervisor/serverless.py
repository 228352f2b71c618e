"""Self-healing on EMR Serverless, on this machine: the patched service, the
real job as each attempt, and the real supervisor and custom resource on top.

* :class:`LocalService`: moto (EMR Serverless patched by
  :mod:`local.serverless_moto`, plus S3, SNS, SQS and CloudWatch) served by
  moto's ``ThreadedMotoServer`` in THIS process, so that the patch's callbacks
  run here: each attempt of a job run (its start, each retry of the retry
  policy) is the instance's job launched from the run's own request
  (:func:`local.serverless_launch.start`), and :meth:`LocalService.poll` ends
  the attempts whose process exited (:class:`local.serverless_runs.RunProcesses`:
  status 0 ``SUCCESS``, else retried within the policy or ``FAILED``).
  ``CancelJobRun`` kills the attempt's process group.
* :class:`LocalFilesS3`: the job's checkpoint is a local directory (its lease a
  ``flock``, :class:`model.lease.FileLease`); the supervisor and the handler read
  S3. This facade serves ``s3://local-fs/<absolute path>`` from local files:
  the lease object exists, with ``expires_at`` a TTL ahead, exactly while a
  process holds the ``flock`` (:func:`model.lease.file_lease_state`), which is
  what a fresh S3 lease says; the exit record, the stop marker and the
  supervisor's state are the files themselves. Every other bucket goes to
  moto.
* :func:`run_until`: one step (poll the service, run a check, ...) at a time
  until a condition holds, bounded; no sleep stands for a condition.

No AWS account is reached: every client points at the in-process server.
"""

from __future__ import annotations

import io
import json
import os
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import boto3
from botocore.exceptions import ClientError
from moto.server import ThreadedMotoServer

from local import serverless_moto
from local.emulators import free_port
from local.harness import LocalInstance
from local.serverless_launch import plan, start
from local.serverless_runs import RunProcesses
from model.lease import LEASE_NAME, file_lease_state
from producer.local_run import JOB_CONFIG_FILE

LOCAL_BUCKET: Final = "local-fs"
ACCOUNT: Final = "123456789012"  # moto's default account
CREDENTIALS: Final = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
LEASE_TTL_SEC: Final = 60.0


def s3_uri(path: str | Path) -> str:
    """The ``s3://`` URI :class:`LocalFilesS3` serves ``path`` (a local file) under."""
    return f"s3://{LOCAL_BUCKET}{Path(path).resolve()}"


def _local(key: str) -> Path:
    return Path("/" + key.lstrip("/"))


def lease_body(path: Path, now: float) -> bytes | None:
    """The S3 lease object a held ``flock`` stands for; None while it is free."""
    state = file_lease_state(path)
    if not state.running:
        return None
    body = {"owner": state.holder or "unknown", "expires_at": now + LEASE_TTL_SEC}
    return json.dumps(body).encode()


class LocalFilesS3:
    """The S3 calls of the supervisor and the handler (GetObject, PutObject,
    DeleteObject, HeadObject, ListObjectsV2) on local files for bucket
    ``local-fs``; anything else is ``s3``'s (moto)."""

    def __init__(self, s3: Any) -> None:
        self._s3 = s3
        self.exceptions = s3.exceptions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)

    def _body(self, key: str) -> bytes | None:
        path = _local(key)
        if path.name == LEASE_NAME:
            return lease_body(path, time.time())
        return path.read_bytes() if path.is_file() else None

    def _missing(self, key: str, operation: str) -> Exception:
        error = {"Error": {"Code": "NoSuchKey", "Message": f"{key}: no such key"}}
        return self.exceptions.NoSuchKey(error, operation)  # type: ignore[no-any-return]

    def get_object(self, *, Bucket: str, Key: str, **kw: Any) -> Any:  # noqa: N803
        if Bucket != LOCAL_BUCKET:
            return self._s3.get_object(Bucket=Bucket, Key=Key, **kw)
        body = self._body(Key)
        if body is None:
            raise self._missing(Key, "GetObject")
        return {"Body": io.BytesIO(body), "ContentLength": len(body)}

    def head_object(self, *, Bucket: str, Key: str, **kw: Any) -> Any:  # noqa: N803
        if Bucket != LOCAL_BUCKET:
            return self._s3.head_object(Bucket=Bucket, Key=Key, **kw)
        body = self._body(Key)
        if body is None:
            raise ClientError({"Error": {"Code": "404", "Message": "Not Found"}}, "HeadObject")
        return {"ContentLength": len(body)}

    def put_object(self, *, Bucket: str, Key: str, Body: bytes | str = b"", **kw: Any) -> Any:  # noqa: N803
        if Bucket != LOCAL_BUCKET:
            return self._s3.put_object(Bucket=Bucket, Key=Key, Body=Body, **kw)
        path = _local(Key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(Body.encode() if isinstance(Body, str) else Body)
        return {}

    def delete_object(self, *, Bucket: str, Key: str, **kw: Any) -> Any:  # noqa: N803
        if Bucket != LOCAL_BUCKET:
            return self._s3.delete_object(Bucket=Bucket, Key=Key, **kw)
        _local(Key).unlink(missing_ok=True)
        return {}

    def list_objects_v2(self, *, Bucket: str, Prefix: str = "", **kw: Any) -> Any:  # noqa: N803
        if Bucket != LOCAL_BUCKET:
            return self._s3.list_objects_v2(Bucket=Bucket, Prefix=Prefix, **kw)
        folder = _local(Prefix).parent
        keys = sorted(
            str(path).lstrip("/")
            for path in (folder.iterdir() if folder.is_dir() else ())
            if str(path).lstrip("/").startswith(Prefix.lstrip("/"))
            and self._body(str(path)) is not None
        )
        keys = keys[: int(kw.get("MaxKeys", 1000))]
        return {"Contents": [{"Key": key} for key in keys], "KeyCount": len(keys)}


Version = tuple[Any, Any]  # (instance, JobConfig)


@dataclass
class LocalService:
    """The patched EMR Serverless in this process, running ``local``'s job.

    ``versions``: the entry point of a ``StartJobRun`` request -> the
    (instance, job config) it deploys (:meth:`request` adds them); an attempt
    launches the version its run's request names, and fails the test's
    expectation loudly (a KeyError in the server's log) for an unknown one."""

    local: LocalInstance
    region: str
    versions: dict[str, Version] = field(default_factory=dict)
    # (run id, attempt, epoch seconds, live job processes other than the new one,
    # lease held) at each launch: a launch must find no other job and a free lease.
    launches: list[tuple[str, int, float, int, bool]] = field(default_factory=list)
    processes: RunProcesses | None = None
    endpoint: str = ""
    application_id: str = ""

    def client(self, name: str) -> Any:
        return boto3.client(
            name, region_name=self.region, endpoint_url=self.endpoint, **CREDENTIALS
        )

    def clients(self) -> dict[str, Any]:
        """What the supervisor and the handler are given (S3 through the facade)."""
        found = {n: self.client(n) for n in ("emr-serverless", "sns", "cloudwatch", "sqs")}
        found["s3"] = LocalFilesS3(self.client("s3"))
        return found

    def request(self, instance: Any, config: Any) -> dict[str, Any]:
        """The ``StartJobRun`` body the stack would send for this version, on
        this application (local/serverless_launch.py's own request)."""
        body = plan(instance, config, self.local.root, dict(os.environ)).request
        # The stack resolves the application and the role at deploy; here, moto's
        # (it refuses a role of another account: "Cross-account pass role").
        role = body["executionRoleArn"].rsplit(":", 1)[-1]
        body = {
            **body,
            "applicationId": self.application_id,
            "executionRoleArn": f"arn:aws:iam::{ACCOUNT}:{role}",
        }
        self.versions[body["jobDriver"]["sparkSubmit"]["entryPoint"]] = (instance, config)
        return body

    def _launch(self, run: Any) -> Any:
        local = self.local
        lease = Path(local.config.checkpoint_location) / LEASE_NAME
        others = sum(job.running for job in local.all_jobs)
        self.launches.append(
            (run.id, int(run.attempt), time.time(), others, file_lease_state(lease).running)
        )
        instance, config = self.versions[run.job_driver["sparkSubmit"]["entryPoint"]]
        local.instance, local.config = instance, config
        job = start(instance, config, local.root / JOB_CONFIG_FILE, local.log_path)
        local.job = job
        local.all_jobs.append(job)
        local.runs += 1
        return job.process

    def run(self, run_id: str) -> Any:
        return serverless_moto.job_run(self.application_id, run_id, ACCOUNT, self.region)

    def poll(self) -> list[tuple[str, int, str]]:
        """End the attempts whose job exited (a retry launches the next)."""
        assert self.processes is not None
        return self.processes.poll(self.run)

    @property
    def ended(self) -> list[tuple[str, int, int, str]]:
        """(run id, attempt, process status, the run's state after it), in order."""
        assert self.processes is not None
        return self.processes.ended


@contextmanager
def local_service(local: LocalInstance) -> Iterator[LocalService]:
    """Serve the patched moto in a thread, with an application for ``local``'s
    instance; every attempt's process is killed on the way out.

    The server starts empty: moto keeps its state in this process's module
    globals, not in the server, so without the reset an earlier service in
    the same process (an earlier test on the same pytest worker) left its
    applications, of the same name, behind, and the application guard, which
    finds the application by name, acted on one of those."""
    serverless_moto.patch_emr_serverless()
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    service = LocalService(local, local.config.region, endpoint=f"http://127.0.0.1:{port}")
    try:
        _wait_port(port)
        reset = urllib.request.Request(f"{service.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(reset, timeout=30) as answer:
            answer.read()
        app = service.client("emr-serverless").create_application(
            name=local.name, releaseLabel="emr-spark-8.1.0", type="SPARK"
        )
        service.application_id = app["applicationId"]
        with RunProcesses(service._launch) as processes:
            service.processes = processes
            yield service
    finally:
        server.stop()
        serverless_moto.unpatch_emr_serverless()


def _wait_port(port: int, timeout: float = 30.0) -> None:
    def open_() -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    run_until(open_, f"moto on port {port}", timeout)


def run_until(
    condition: Callable[[], bool],
    what: str,
    timeout: float,
    step: Callable[[], object] = lambda: None,
    interval: float = 0.25,
) -> None:
    """``step()`` then ``condition()``, every ``interval`` seconds, until the
    condition holds; TimeoutError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        step()
        if condition():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f}s")
        time.sleep(interval)
