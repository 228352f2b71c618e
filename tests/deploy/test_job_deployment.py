"""JobDeployment synthesized in a minimal stack: what CloudFormation would run
is exactly what infra/emr_step.build_step builds, and the uploads carry the
bytes in the repository."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import ManualArgs, lint_file

from artifacts.packaging import stage_bootstrap, stage_package, zip_package
from infra.emr_step import StepSpec, build_step
from model.config import JobConfig
from tests.deploy.conftest import (
    REPO,
    Synthesized,
    build,
    physical_names,
    resolve_cfn,
    source_root,
)

pytestmark = pytest.mark.synth


def resources(template: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def test_synthesized_step_equals_the_builder_output(synthesized: Synthesized) -> None:
    steps = resources(synthesized.template, "AWS::EMR::Step")
    assert len(steps) == 1
    (props,) = (r["Properties"] for r in steps.values())
    expected = build_step(synthesized.job.step_spec)
    cluster_id = synthesized.stack.resolve(synthesized.cluster.ref)
    assert props == synthesized.stack.resolve({**expected, "JobFlowId": cluster_id}) | {
        "JobFlowId": cluster_id
    }
    assert props["HadoopJarStep"]["Jar"] == "command-runner.jar"
    assert props["ActionOnFailure"] == "CONTINUE"


def test_stack_output_rebuilds_the_same_step_after_cloudformation(
    synthesized: Synthesized,
) -> None:
    """What redeploy reads (the output) and what CloudFormation submits (the
    step resource) give the same step once tokens become physical names."""
    template = synthesized.template
    names = physical_names(template)
    output = resolve_cfn(template["Outputs"]["JobStepSpec"]["Value"], names)
    spec = StepSpec.from_dict(json.loads(output))
    (props,) = (r["Properties"] for r in resources(template, "AWS::EMR::Step").values())
    deployed = resolve_cfn(props, names)
    assert build_step(spec) == {
        k: deployed[k] for k in ("Name", "ActionOnFailure", "HadoopJarStep")
    }
    assert resolve_cfn(template["Outputs"]["JobClusterId"]["Value"], names) == deployed["JobFlowId"]
    data_bucket = names[next(k for k in names if k.startswith("Data"))]
    assert spec.stop_marker_uri == f"s3://{data_bucket}/control/orders-eu-west-1/stop"
    # The handover wait covers the job's own graceful stop bound plus YARN teardown.
    assert spec.stop_timeout_sec == 300 + 120


def test_cluster_gets_bootstrap_actions_after_their_upload(synthesized: Synthesized) -> None:
    template = synthesized.template
    (cluster_id,) = resources(template, "AWS::EMR::Cluster")
    cluster = template["Resources"][cluster_id]
    names = physical_names(template)
    actions = resolve_cfn(cluster["Properties"]["BootstrapActions"], names)
    assert [a["Name"] for a in actions] == ["install-python-deps", "install-pinned-jars"]
    prefix = actions[0]["ScriptBootstrapAction"]["Path"].rsplit("/", 1)[0]
    assert prefix.startswith("s3://bucket-artifacts") and "/artifacts/bootstrap/" in prefix
    jars = actions[1]["ScriptBootstrapAction"]
    assert jars["Path"] == f"{prefix}/install_jars.sh"
    args = jars["Args"]
    # EMR downloads each script alone: the shared library comes first, same prefix.
    assert args[:2] == ["--lib", f"{prefix}/bootstrap-lib.sh"]
    assert args[args.index("--lock") + 1] == f"{prefix}/jars.lock"
    assert args[args.index("--launcher") + 1] == f"{prefix}/streaming-spark-submit.sh"
    assert args[args.index("--dest") + 1] == "/opt/streaming/jars"
    assert args[args.index("--only") + 1] == (
        "jackson-core,jackson-databind,jackson-annotations,jackson-datatype-jsr310"
    )
    assert "--allow-unverified" not in args
    python = actions[0]["ScriptBootstrapAction"]["Args"]
    assert python == [
        "--lib",
        f"{prefix}/bootstrap-lib.sh",
        "--requirements",
        f"{prefix}/requirements.lock",
        "--python",
        "/usr/bin/python3.11",
    ]
    assert any("BootstrapUpload" in dep for dep in cluster["DependsOn"])
    (step,) = resources(template, "AWS::EMR::Step").values()
    assert any("PackageUpload" in dep for dep in step["DependsOn"])


def asset_dir(synthesized: Synthesized, upload: str) -> Path:
    """The staged asset directory a BucketDeployment uploads (from the asset manifest)."""
    template = synthesized.template
    (custom,) = (
        r for k, r in template["Resources"].items()
        if r["Type"] == "Custom::CDKBucketDeployment" and k.startswith(f"Job{upload}")
    )  # fmt: skip
    keys = custom["Properties"]["SourceObjectKeys"]  # the staged directory is the first source
    manifest = json.loads(
        (synthesized.outdir / f"{synthesized.stack.stack_name}.assets.json").read_text()
    )
    source = manifest["files"][keys[0].removesuffix(".zip")]["source"]
    assert source["packaging"] == "zip"
    return synthesized.outdir / source["path"]


def test_bootstrap_upload_carries_the_repository_scripts_and_locks(
    synthesized: Synthesized,
) -> None:
    staged = asset_dir(synthesized, "BootstrapUpload")
    expected = {
        "bootstrap-lib.sh": REPO / "bootstrap" / "bootstrap-lib.sh",
        "install_python_deps.sh": REPO / "bootstrap" / "install_python_deps.sh",
        "install_jars.sh": REPO / "bootstrap" / "install_jars.sh",
        "streaming-spark-submit.sh": REPO / "bootstrap" / "streaming-spark-submit.sh",
        "jars.lock": REPO / "bootstrap" / "jars.lock",
        "requirements.lock": REPO / "job" / "requirements.lock",
    }
    assert sorted(p.name for p in staged.iterdir()) == sorted(expected)
    for name, source in expected.items():
        assert (staged / name).read_bytes() == source.read_bytes(), name


def test_package_upload_has_the_zipped_app_and_the_entry_point(synthesized: Synthesized) -> None:
    staged = asset_dir(synthesized, "PackageUpload")
    assert sorted(p.name for p in staged.iterdir()) == ["app.zip", "main.py", "streaming-job.jar"]
    # Exactly the zip artifacts.packaging builds (test_app_package checks its contents).
    assert (staged / "app.zip").read_bytes() == zip_package(synthesized.source_root)
    assert (staged / "main.py").read_bytes() == (REPO / "job" / "main.py").read_bytes()
    # The job config travels as a second source, resolved by CloudFormation.
    (custom,) = (
        r for k, r in synthesized.template["Resources"].items()
        if r["Type"] == "Custom::CDKBucketDeployment" and k.startswith("JobPackageUpload")
    )  # fmt: skip
    assert len(custom["Properties"]["SourceObjectKeys"]) == 2


def test_uploaded_job_config_is_a_valid_job_config_after_deploy(
    synthesized: Synthesized,
) -> None:
    template = synthesized.template
    (custom,) = (
        r for k, r in template["Resources"].items()
        if r["Type"] == "Custom::CDKBucketDeployment" and k.startswith("JobPackageUpload")
    )  # fmt: skip
    props = custom["Properties"]
    manifest = json.loads(
        (synthesized.outdir / f"{synthesized.stack.stack_name}.assets.json").read_text()
    )
    source = manifest["files"][props["SourceObjectKeys"][1].removesuffix(".zip")]["source"]
    (config_file,) = (synthesized.outdir / source["path"]).iterdir()
    assert config_file.name == "job-config.json"
    text = config_file.read_text(encoding="utf-8")
    names = physical_names(template)
    for marker, value in props["SourceMarkers"][1].items():
        text = text.replace(marker, resolve_cfn(value, names))
    config = JobConfig.from_dict(json.loads(text))
    assert config.instance_id == "orders-eu-west-1"
    assert config.stop_marker_path is not None
    assert config.stop_marker_path.endswith("/control/orders-eu-west-1/stop")


def test_package_version_moves_with_the_job_but_not_the_bootstrap(tmp_path: Path) -> None:
    root = source_root(tmp_path)
    stage = tmp_path / "stage"
    _, boot_before = stage_bootstrap(root, stage)
    _, job_before = stage_package(root, stage, "{}")
    assert stage_package(root, stage, "{}")[1] == job_before  # deterministic bytes
    (root / "model" / "config.py").write_text("# changed\n", encoding="utf-8")
    assert stage_package(root, stage, "{}")[1] != job_before
    assert stage_package(root, stage, '{"trigger_interval_sec": 5}')[1] != job_before
    assert stage_bootstrap(root, stage)[1] == boot_before


def test_the_job_jar_ships_with_the_job_and_a_java_change_is_a_new_version(
    tmp_path: Path,
) -> None:
    root = source_root(tmp_path)
    stage = tmp_path / "stage"
    target, before = stage_package(root, stage, "{}")
    with zipfile.ZipFile(target / "streaming-job.jar") as jar:
        names = jar.namelist()
        assert "streaming/dedup/ArrivalDedupProcessor.class" in names
        assert "streaming/undeclared/UndeclaredMembers.class" in names
    source = root / "jvm" / "src" / "streaming" / "dedup" / "ArrivalDedupProcessor.java"
    text = source.read_text(encoding="utf-8")
    # A comment compiles to the same bytes: the same version.
    source.write_text(text + "\n// a comment\n", encoding="utf-8")
    assert stage_package(root, stage, "{}")[1] == before
    source.write_text(text.replace("must be > 0", "must be positive"), encoding="utf-8")
    assert stage_package(root, stage, "{}")[1] != before


def test_unverified_jar_is_refused_at_synth(tmp_path: Path) -> None:
    root = source_root(tmp_path)
    with pytest.raises(ValueError, match=r"jackson-dataformat-cbor.*UNVERIFIED"):
        build(root, jar_artifacts=("jackson-core", "jackson-dataformat-cbor"))


def test_unknown_jar_is_refused_at_synth(tmp_path: Path) -> None:
    root = source_root(tmp_path)
    with pytest.raises(ValueError, match=r"'jackson-bogus' is not in bootstrap/jars\.lock"):
        build(root, jar_artifacts=("jackson-bogus",))


def test_cfn_lint_reports_nothing_on_the_construct(synthesized: Synthesized) -> None:
    path = synthesized.outdir / f"{synthesized.stack.stack_name}.template.json"
    matches = lint_file(path, config=ManualArgs(regions=["eu-west-1"]))
    # The test's own log bucket (legacy AccessControl, W3045) is not the construct's.
    ours = [
        f"{m.rule.id} {m.message} ({m.path})"
        for m in matches
        if not (len(m.path) > 1 and str(m.path[1]).startswith("Logs"))
    ]
    assert ours == []
