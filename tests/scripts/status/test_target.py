"""scripts.status.target: which config a command aims at; a deployed instance's
comes from its stack output; an instance a local run does not hold is a usage
error of every command about one instance's job."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import boto3
import pytest

from infra.emr_step import STEP_SPEC_OUTPUT, StepSpec
from model import contract
from scripts import start, stop
from scripts.status import target as target_module
from scripts.status.target import OperatorError, resolve
from tests.scripts.local_runs import INSTANCE, REGION, write_local_run


def test_the_deployed_config_comes_from_the_stack_output(
    tmp_path: Path, aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stack's JobStepSpec names the package; its job-config.json is the config.
    (The outputs are stubbed: moto's CloudFormation takes seconds to import and
    tests/deploy/test_redeploy.py already reads real ones.)"""
    config = write_local_run(tmp_path)
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="artifacts", CreateBucketConfiguration={"LocationConstraint": REGION})
    s3.put_object(Bucket="artifacts", Key="job/v1/job-config.json", Body=config.to_json().encode())
    spec = StepSpec("step", "app", "s3://artifacts/job/v1", "s3://data/stop", ("a-1.jar",))
    stack = contract.stack_name("orders", REGION)
    asked: list[str] = []

    def outputs(_client: Any, name: str) -> dict[str, str]:
        asked.append(name)
        return {STEP_SPEC_OUTPUT: json.dumps(spec.to_dict())} if asked[1:] else {}

    monkeypatch.setattr(target_module, "stack_outputs", outputs)
    with pytest.raises(OperatorError, match=f"stack {stack}: no output {STEP_SPEC_OUTPUT}"):
        resolve(INSTANCE)
    target = resolve(INSTANCE)
    assert asked == [stack, stack]
    assert target.config == config and not target.local and target.stack_name == stack
    assert target.origin == "s3://artifacts/job/v1/job-config.json"
    missing = "s3://artifacts/job/v2/job-config.json"
    with pytest.raises(OperatorError, match=re.escape(f"{missing}: no such")):
        resolve(INSTANCE, config_file=missing)


@pytest.mark.parametrize("main", [start.main, stop.main], ids=["start-job", "stop-job"])
def test_an_unknown_local_run_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], main: Callable[[Sequence[str]], int]
) -> None:
    write_local_run(tmp_path)
    assert main(["--instance", "x-eu-west-1", "--work-dir", str(tmp_path)]) == 2
    assert f"instances run there: {INSTANCE}" in capsys.readouterr().err
