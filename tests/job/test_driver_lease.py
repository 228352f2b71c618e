"""job/driver.py's lease names the version the process runs: the digest of
its ``--config`` (model.job_version), the same the supervisor derives from the
stack's step. No Spark: the work under the lease is replaced by a probe."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from job import driver
from job.outcome import ExitCode
from model.job_version import version_of
from model.lease import JobState, file_lease_state
from tests.job.job_helpers import job_config


@pytest.fixture(autouse=True)
def _restore_signals() -> Iterator[None]:
    saved = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGTERM, saved[0])
    signal.signal(signal.SIGINT, saved[1])


def test_the_job_holds_its_lease_under_the_version_of_its_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = tmp_path / "checkpoint"
    config = job_config(database="d", bootstrap="b:1", checkpoint=str(checkpoint))
    config_path = tmp_path / "job-config.json"
    config_path.write_text(json.dumps(config.to_dict()), encoding="utf-8")
    seen: list[JobState] = []

    def probe(*_args: Any, **_kw: Any) -> ExitCode:
        seen.append(file_lease_state(checkpoint / "_lease"))
        return ExitCode.OK

    monkeypatch.setattr(driver, "_under_lease", probe)
    assert driver.main(["--config", str(config_path)]) == ExitCode.OK
    [held] = seen
    assert held.running
    assert held.version == version_of(str(config_path))
    assert not file_lease_state(checkpoint / "_lease").running, "released on the way out"
