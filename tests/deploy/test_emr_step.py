"""infra/emr_step.build_step: the one definition of how the job is started."""

from __future__ import annotations

import json

import pytest

from infra.emr_step import CBOR_OFF_JAVA_OPTIONS, StepSpec, build_step

SPEC = StepSpec(
    step_name="streaming-orders-eu-west-1-abc",
    app_name="streaming-orders-eu-west-1",
    package_uri="s3://artifacts/artifacts/job/abc",
    stop_marker_uri="s3://data/control/orders-eu-west-1/stop",
    jar_files=("jackson-core-2.18.2.jar", "jackson-databind-2.18.2.jar"),
)


def submit_args(step: dict[str, object]) -> list[str]:
    args = step["HadoopJarStep"]["Args"]  # type: ignore[index]
    return list(args[args.index("--") + 1 :])


def test_step_runs_the_launcher_then_cluster_mode_spark_submit() -> None:
    step = build_step(SPEC)
    assert step["Name"] == SPEC.step_name
    assert step["ActionOnFailure"] == "CONTINUE"
    assert step["HadoopJarStep"]["Jar"] == "command-runner.jar"
    args = step["HadoopJarStep"]["Args"]
    assert args[0] == "/usr/local/bin/streaming-spark-submit"
    launcher = args[: args.index("--")]
    assert launcher[launcher.index("--jars-dir") + 1] == "/opt/streaming/jars"
    assert launcher[launcher.index("--app-name") + 1] == SPEC.app_name
    assert launcher[launcher.index("--stop-marker") + 1] == SPEC.stop_marker_uri
    assert "--java-option" not in launcher  # CBOR stays on unless switched off

    submit = submit_args(step)
    assert submit[:5] == ["spark-submit", "--master", "yarn", "--deploy-mode", "cluster"]
    assert submit[submit.index("--py-files") + 1] == "s3://artifacts/artifacts/job/abc/app.zip"
    assert submit[submit.index("--jars") + 1] == (
        "local:/opt/streaming/jars/jackson-core-2.18.2.jar,"
        "local:/opt/streaming/jars/jackson-databind-2.18.2.jar,"
        "s3://artifacts/artifacts/job/abc/streaming-job.jar"  # job code: its version's
    )
    assert "spark.yarn.submit.waitAppCompletion=false" in submit
    assert "spark.yarn.appMasterEnv.PYSPARK_PYTHON=/usr/bin/python3.11" in submit
    assert "spark.executorEnv.PYSPARK_PYTHON=/usr/bin/python3.11" in submit
    # The step never replaces EMR's classpath itself: the launcher merges it.
    assert not any("extraClassPath" in a for a in submit)
    assert submit[-3:] == [
        "s3://artifacts/artifacts/job/abc/main.py",
        "--config",
        "s3://artifacts/artifacts/job/abc/job-config.json",
    ]


def test_cbor_switch_adds_both_sdk_properties() -> None:
    step = build_step(
        StepSpec(**{**SPEC.to_dict(), "jar_files": SPEC.jar_files, "disable_cbor": True})
    )
    args = step["HadoopJarStep"]["Args"]
    launcher = args[: args.index("--")]
    given = [launcher[i + 1] for i, a in enumerate(launcher) if a == "--java-option"]
    assert given == list(CBOR_OFF_JAVA_OPTIONS)
    assert given == ["-Daws.cborEnabled=false", "-Dcom.amazonaws.sdk.disableCbor=true"]


def test_spec_survives_the_stack_output_round_trip() -> None:
    text = json.dumps(SPEC.to_dict())
    assert StepSpec.from_dict(json.loads(text)) == SPEC
    assert build_step(StepSpec.from_dict(json.loads(text))) == build_step(SPEC)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"jar_files": ()}, "jar_files"),
        ({"jar_files": ("/abs/x.jar",)}, "jar_files"),
        ({"stop_timeout_sec": 0}, "stop_timeout_sec"),
        ({"action_on_failure": "TERMINATE_CLUSTER"}, "action_on_failure"),
    ],
)
def test_invalid_specs_name_the_field(change: dict[str, object], message: str) -> None:
    raw = {**SPEC.to_dict(), **change}
    with pytest.raises(ValueError, match=message):
        StepSpec.from_dict(raw)


def test_unknown_spec_field_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown field 'surprise'"):
        StepSpec.from_dict({**SPEC.to_dict(), "surprise": 1})


def test_the_launcher_reads_the_lease_and_records_its_exit_beside_the_checkpoint() -> None:
    spec = StepSpec(
        **{
            **SPEC.to_dict(),
            "jar_files": SPEC.jar_files,
            "checkpoint_uri": "s3://data/checkpoints/orders-eu-west-1/",
        }
    )
    args = build_step(spec)["HadoopJarStep"]["Args"]
    launcher = args[: args.index("--")]
    assert launcher[launcher.index("--lease") + 1] == (
        "s3://data/checkpoints/orders-eu-west-1/_lease"
    )
    assert launcher[launcher.index("--exit-record") + 1] == (
        "s3://data/checkpoints/orders-eu-west-1/_exit"
    )
    assert "--lease" not in build_step(SPEC)["HadoopJarStep"]["Args"]  # type: ignore[index]
