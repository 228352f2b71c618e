"""The local launch of a serverless instance (local/serverless_launch.py) runs
the job run the stack synthesizes: the same entry point, arguments and
spark-submit parameters, with only the s3:// locations differing."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from local import serverless_launch as sl
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.synth

LIGHT = "Streaming-light-us-east-1"


def _flat(value: Any) -> str:
    """A synthesized string: Fn::Join flattened, every other token as <token>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_flat(part) for part in parts)
    return "<token>"


def _shape(driver: dict[str, Any]) -> tuple[str, list[str], list[str]]:
    """Entry point, arguments and parameters with each s3:// location reduced
    to its file name (what the two sides name alike)."""

    def names(text: str) -> str:
        return re.sub(r"s3://[^\s,#]*/([^/\s,#]+)", r"s3://.../\1", text)

    params = [names(t) for t in shlex.split(_flat(driver["sparkSubmitParameters"]))]
    args = [names(_flat(a)) for a in driver["entryPointArguments"]]
    return names(_flat(driver["entryPoint"])), args, params


def test_the_local_launch_runs_the_synthesized_job_run(
    synthesized_serverless: Synthesized, tmp_path: Path
) -> None:
    stack = synthesized_serverless.stacks[LIGHT]
    _, resource = synthesized_serverless.one(LIGHT, "Custom::ServerlessJobRun")
    synthesized = resource["Properties"]["StartJobRun"]["jobDriver"]["sparkSubmit"]
    local = sl.job_run(
        stack.config,
        "s3://local-artifacts/job-package-x",
        "s3://local-artifacts/job-python-deps/job-python-deps.tar.gz",
        "s3://local-artifacts/job-package-x/app.zip",
    )["jobDriver"]["sparkSubmit"]
    assert _shape(local) == _shape(synthesized)
    entry, args, params = _shape(synthesized)
    assert entry == "s3://.../main.py"
    assert args == ["--config", "s3://.../job-config.json", "--platform", "serverless"]
    assert "spark.archives=s3://.../job-python-deps.tar.gz#jobdeps,s3://.../app.zip#jobapp" in (
        params
    )
    assert "spark.executorEnv.PYTHONPATH=./jobdeps:./jobapp" in params
