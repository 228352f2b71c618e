"""local/job_process.py: the job child's environment (the process itself is
exercised by every e2e test that starts a job)."""

from __future__ import annotations

import os
import sys

from local.job_process import REPO_ROOT, job_environment
from producer.local_run import FAKE_CREDENTIALS


def test_the_child_gets_fake_credentials_the_venv_python_and_the_repo_on_its_path() -> None:
    caller = {"AWS_ACCESS_KEY_ID": "a-real-looking-key", "AWS_DEFAULT_REGION": "us-east-1"}
    base = {**caller, "PYTHONPATH": "/elsewhere", "HOME": "/home/someone"}
    env = job_environment(base, "eu-west-1")
    # No real account: the fake credentials replace whatever the caller had.
    assert {key: env[key] for key in FAKE_CREDENTIALS} == FAKE_CREDENTIALS
    assert env["AWS_DEFAULT_REGION"] == "eu-west-1"
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    assert env["PYTHONPATH"].split(os.pathsep) == [str(REPO_ROOT), "/elsewhere"]
    assert env["HOME"] == "/home/someone" and env["PYTHONUNBUFFERED"] == "1"
    assert base["AWS_DEFAULT_REGION"] == "us-east-1", "the caller's mapping is left alone"


def test_without_a_pythonpath_the_repo_alone_is_on_it() -> None:
    env = job_environment({"PYTHONUNBUFFERED": "0"}, "ap-northeast-2")
    assert env["PYTHONPATH"] == str(REPO_ROOT)
    assert env["PYTHONUNBUFFERED"] == "0", "an explicit choice is kept"
    assert (REPO_ROOT / "job" / "__main__.py").is_file()
