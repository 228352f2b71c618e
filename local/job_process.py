"""The job as a child process: start, stop gracefully, crash on purpose.

The local run and the end-to-end suite run exactly what EMR runs
(``python -m job --config <file>``, the same ``main()``), in its own process
group so that a crash test can kill the whole driver at once (the Python
driver, its JVM and its Python workers), like a lost node, and so that
Ctrl-C in the terminal reaches the run's ``finally`` rather than racing it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Final

from model.config import JobConfig
from producer.local_run import FAKE_CREDENTIALS

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
_TERM_GRACE_SEC: Final = 30.0


def job_environment(base: dict[str, str], region: str) -> dict[str, str]:
    """What the child needs: the venv's Python for Spark's workers, fake AWS
    credentials (no real account can be reached), and the repo on the path."""
    env = dict(base)
    env.update(FAKE_CREDENTIALS)
    env["AWS_DEFAULT_REGION"] = region
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), base.get("PYTHONPATH", "")) if p
    )
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def write_config(config: JobConfig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config.to_json(), encoding="utf-8")
    return path


@dataclass
class JobProcess:
    """One run of the job; ``log`` collects its stdout and stderr."""

    config: JobConfig
    config_path: Path
    log_path: Path
    process: subprocess.Popen[bytes]
    _log: IO[bytes]

    @classmethod
    def start(cls, config: JobConfig, config_path: Path, log_path: Path) -> JobProcess:
        write_config(config, config_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = log_path.open("ab")
        log.write(f"\n===== start {time.strftime('%H:%M:%S')} =====\n".encode())
        log.flush()
        process = subprocess.Popen(
            [sys.executable, "-m", "job", "--config", str(config_path)],
            cwd=str(REPO_ROOT),
            env=job_environment(dict(os.environ), config.region),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        return cls(config, config_path, log_path, process, log)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self.process.poll()

    def wait(self, timeout: float) -> int:
        """The exit code; TimeoutError (job left running) past ``timeout``."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(
                f"job {self.config.instance_id} still running after {timeout:.0f}s"
            ) from exc
        self._reap_group()
        self._log.close()
        return code

    def request_stop(self) -> None:
        """Write the stop marker: the job ends after the current batch, exit 0."""
        if self.config.stop_marker_path is None:
            raise ValueError(f"job {self.config.instance_id}: config has no stop_marker_path")
        marker = Path(self.config.stop_marker_path)
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("stop\n", encoding="utf-8")

    def stop(self, timeout: float) -> int:
        self.request_stop()
        return self.wait(timeout)

    def kill(self) -> int:
        """SIGKILL the whole process group: no shutdown hook, no cleanup."""
        self._signal_group(signal.SIGKILL)
        return self.wait(timeout=30)

    def terminate(self) -> int:
        """SIGTERM (graceful per the job's contract), then SIGKILL after a grace period."""
        self._signal_group(signal.SIGTERM)
        try:
            return self.wait(timeout=_TERM_GRACE_SEC)
        except TimeoutError:
            return self.kill()

    def close(self) -> None:
        """Leave nothing behind: stop a running job (SIGTERM, then SIGKILL), or
        reap what is left of its process group if the driver already exited."""
        if self.running:
            self.terminate()
        else:
            self._reap_group()
        if not self._log.closed:
            self._log.close()

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def _reap_group(self) -> None:
        """The driver is gone; make sure its JVM and workers are too (a JVM that
        outlives a killed driver would hold the Derby metastore lock)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def clear_stop_marker(config: JobConfig) -> None:
    if config.stop_marker_path is not None:
        Path(config.stop_marker_path).unlink(missing_ok=True)
