"""cdk-nag AwsSolutionsChecks: the control, and the form of every acknowledgment.

That every declared instance synthesizes without a cdk-nag finding and passes
cfn-lint: tests/infra/stacks/test_declared_instances.py (the user's cdk.json)."""

from __future__ import annotations

import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from cfnlint.api import ManualArgs, lint_file

from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.synth

# Acknowledgments without a "[finding]" part cover a whole rule on one
# resource; only these rules may be acknowledged that way.
WHOLE_RULE_ACKNOWLEDGMENTS = {
    "AwsSolutions-S1",
    "AwsSolutions-EMR4",
    "AwsSolutions-EMR5",
    "AwsSolutions-EMR6",
    # CDK's BucketDeployment Lambda: CDK picks its runtime; L1 has no finding id.
    "AwsSolutions-L1",
}


def test_control_the_same_checks_fail_a_non_compliant_bucket(tmp_path: Path) -> None:
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Control", env=cdk.Environment(region="eu-west-1"))
    s3.Bucket(stack, "Plain")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for p in report["pluginReports"] for v in p["violations"]}
    assert {"AwsSolutions-S1", "AwsSolutions-S10"} <= rules


@pytest.mark.parametrize("fixture", ["synthesized", "synthesized_serverless"])
def test_each_acknowledgment_is_one_finding_next_to_its_resource(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    """The example, and the serverless one (the execution role, the
    job-run resource and the serverless supervisor acknowledge their own)."""
    synthesized: Synthesized = request.getfixturevalue(fixture)
    seen = 0
    for stack in synthesized.stacks.values():
        for construct in stack.node.find_all():
            for entry in construct.node.metadata:
                if entry.type != cdk.Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                    continue
                for rule, reason in entry.data.items():
                    if "AwsSolutions-" not in rule:
                        continue  # CDK's own CloudFormation-Validate acknowledgments
                    seen += 1
                    rule_id = rule.split("::", 1)[-1]
                    assert construct is not stack, f"{rule_id} acknowledged on a whole stack"
                    assert "[" in rule_id or rule_id in WHOLE_RULE_ACKNOWLEDGMENTS, rule_id
                    assert len(reason) >= 60 and reason.endswith("."), (rule_id, reason)
    assert seen >= 20


def test_the_serverless_stacks_pass_cdk_nag_and_cfn_lint(
    synthesized_serverless: Synthesized,
) -> None:
    """cdk-nag and cfn-lint on tests/fixtures/cdk_serverless.json (a serverless
    instance and an EMR one on a shared stack); the user's cdk.json is checked
    by tests/infra/stacks/test_declared_instances.py."""

    assert synthesized_serverless.error is None
    assert synthesized_serverless.report is not None
    assert synthesized_serverless.report["pluginReports"] == []
    assert any(
        c.compute == "serverless"
        for c in map(synthesized_serverless.config, synthesized_serverless.stacks)
    )
    for name, path in synthesized_serverless.template_paths.items():
        matches = lint_file(path, config=ManualArgs(regions=["us-east-1"]))
        assert [m for m in matches if m.rule.id[0] in "EFW"] == [], name
