"""bench/synth_child.py: the generated context, and a child that loads no Spark."""

from __future__ import annotations

import subprocess
import sys

from bench import synth_child
from infra import config


def test_each_generated_instance_has_its_own_domain_and_tls_zip() -> None:
    context = synth_child.synth_context(config, 3)

    instances = context[config.CONTEXT_KEY]["instances"]
    assert [i["domain"] for i in instances] == ["scale0", "scale1", "scale2"]
    assert {i["region"] for i in instances} == {synth_child.SYNTH_REGION}
    zips = {i["emr"]["tls_certificates_s3_uri"] for i in instances}
    assert len(zips) == 3
    assert context[config.SYNTH_CHECK_CONTEXT_KEY] is True


def test_the_defaults_are_cdk_json_s() -> None:
    declared = config.read_cdk_context(synth_child.REPO / "cdk.json")[config.CONTEXT_KEY]

    context = synth_child.synth_context(config, 1)

    assert context[config.CONTEXT_KEY]["defaults"] == declared.get("defaults", {})


def test_importing_the_child_loads_neither_spark_nor_the_cdk_app() -> None:
    """The clock starts after the import: what the module loads first is not timed."""
    probe = (
        "import sys, bench.synth_child; "
        "print(sorted(m for m in ('pyspark', 'infra', 'aws_cdk', 'job') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=synth_child.REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"
