"""The last step of make integ: a stack still there is reported."""

from __future__ import annotations

import json

import boto3
import pytest
from moto import mock_aws

from integ import leftovers

TEMPLATE = json.dumps({"Resources": {"T": {"Type": "AWS::SNS::Topic"}}})


@mock_aws
def test_a_stack_left_behind_is_reported_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    client = boto3.client("cloudformation", region_name="eu-west-1")
    client.create_stack(StackName="IntegAssert-integ-eu-west-1", TemplateBody=TEMPLATE)
    assert leftovers.main(["integ-eu-west-1"]) == 1
    assert "left behind: IntegAssert-integ-eu-west-1: CREATE_COMPLETE" in capsys.readouterr().out


@mock_aws
def test_nothing_left_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert leftovers.main(["integ-eu-west-1"]) == 0
    assert "nothing left of integ-eu-west-1" in capsys.readouterr().out


def test_the_instance_and_its_assertion_stack_are_checked() -> None:
    assert leftovers.stack_names("integ", "eu-west-1") == [
        "Streaming-integ-eu-west-1",
        "IntegAssert-integ-eu-west-1",
    ]
