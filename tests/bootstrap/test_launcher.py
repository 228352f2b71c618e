"""bootstrap/streaming-spark-submit.sh with fake spark-submit, yarn and aws.

The launcher must keep every EMR default on the classpath (pinned jars first,
EMR's entries after, in order), append the CBOR switch to EMR's Java options
rather than replace them, and stop the running version through the stop marker
before submitting, giving up (without submitting) after a bounded wait.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "bootstrap" / "streaming-spark-submit.sh"

# spark.driver.extraClassPath of an emr-7.1.0 cluster (its spark-defaults.conf),
# carrying EMRFS, hadoop-aws, the SDKs and the Kinesis connector: none may drop.
EMR_CLASSPATH = (
    "/usr/lib/hadoop-lzo/lib/*:/usr/lib/hadoop/hadoop-aws.jar:/usr/share/aws/aws-java-sdk/*:"
    "/usr/share/aws/aws-java-sdk-v2/*:/usr/share/aws/emr/goodies/lib/emr-spark-goodies.jar:"
    "/usr/share/aws/emr/security/conf:/usr/share/aws/emr/security/lib/*:"
    "/usr/share/aws/redshift/jdbc/*:/usr/share/aws/redshift/spark-redshift/lib/*:"
    "/usr/share/aws/kinesis/spark-sql-kinesis/lib/*:"
    "/usr/share/aws/hmclient/lib/aws-glue-datacatalog-spark-client.jar:"
    "/usr/share/java/Hive-JSON-Serde/hive-openx-serde.jar:"
    "/usr/share/aws/emr/s3select/lib/emr-s3-select-spark-connector.jar"
)
EMR_JAVA_OPTIONS = (
    "-Djava.net.preferIPv6Addresses=false -XX:OnOutOfMemoryError='kill -9 %p' "
    "--add-opens=java.base/java.lang=ALL-UNNAMED"
)
CBOR = ("-Daws.cborEnabled=false", "-Dcom.amazonaws.sdk.disableCbor=true")


@pytest.fixture
def fakes(tmp_path: Path) -> Path:
    """A bin dir with spark-submit (records argv), yarn (reports the old app
    running for RUNNING_POLLS calls) and aws (records calls)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "spark-submit": 'printf "%s\\0" "$@" > "$FAKE_DIR/submit.argv"\n',
        "yarn": (
            'n=$(cat "$FAKE_DIR/yarn.calls" 2>/dev/null || echo 0); n=$((n + 1))\n'
            'echo "$n" > "$FAKE_DIR/yarn.calls"\n'
            'echo "Total number of applications (application-types: [] and states: [...]):1"\n'
            'printf "%s\\t%s\\t%s\\n" "Application-Id" "Application-Name" "State"\n'
            'if [ "$RUNNING_POLLS" = always ] || [ "$n" -le "$RUNNING_POLLS" ]; then\n'
            '  printf "%s\\t%s\\t%s\\n" application_1_0001 "  streaming-x-eu-west-1 " RUNNING\n'
            '  printf "%s\\t%s\\t%s\\n" application_1_0002 other-app RUNNING\n'
            "fi\n"
        ),
        "aws": (
            'echo "$*" >> "$FAKE_DIR/aws.calls"\n'
            'for a in "$@"; do if [ "$a" = - ]; then cat > /dev/null; fi; done\n'
        ),
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/usr/bin/env bash\nset -eu\n" + body, encoding="utf-8")
        path.chmod(0o755)
    (tmp_path / "spark-defaults.conf").write_text(
        "spark.eventLog.enabled            true\n"
        f"spark.driver.extraClassPath      {EMR_CLASSPATH}\n"
        f"spark.executor.extraClassPath    {EMR_CLASSPATH}\n"
        f"spark.driver.extraJavaOptions    {EMR_JAVA_OPTIONS}\n"
        f"spark.executor.extraJavaOptions  {EMR_JAVA_OPTIONS} -verbose:gc\n",
        encoding="utf-8",
    )
    return tmp_path


def launch(
    fakes: Path, *args: str, running_polls: str = "0"
) -> tuple[subprocess.CompletedProcess[str], list[str] | None]:
    env = {
        **os.environ,
        "PATH": f"{fakes / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "FAKE_DIR": str(fakes),
        "RUNNING_POLLS": running_polls,
    }
    result = subprocess.run(
        ["bash", str(LAUNCHER), "--defaults", str(fakes / "spark-defaults.conf"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    argv_file = fakes / "submit.argv"
    argv = argv_file.read_text(encoding="utf-8").split("\0")[:-1] if argv_file.exists() else None
    return result, argv


def confs(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "--conf"]
    return dict(p.split("=", 1) for p in pairs)


SUBMIT = ["--", "spark-submit", "--deploy-mode", "cluster", "s3://b/main.py", "--config", "c"]


def test_pinned_jars_go_first_and_every_emr_entry_stays(fakes: Path) -> None:
    result, argv = launch(fakes, "--jars-dir", "/opt/streaming/jars", *SUBMIT)
    assert result.returncode == 0, result.stderr
    assert argv is not None
    conf = confs(argv)
    for role in ("driver", "executor"):
        assert conf[f"spark.{role}.extraClassPath"] == f"/opt/streaming/jars/*:{EMR_CLASSPATH}"
    # Java options untouched when no --java-option is given.
    assert "spark.driver.extraJavaOptions" not in conf
    # The confs precede the application; the application and its args follow intact.
    assert argv[-4:] == ["cluster", "s3://b/main.py", "--config", "c"]
    assert argv.index("--conf") < argv.index("s3://b/main.py")


def test_cbor_switch_is_appended_to_emr_java_options(fakes: Path) -> None:
    options = [arg for opt in CBOR for arg in ("--java-option", opt)]
    result, argv = launch(fakes, "--jars-dir", "/j", *options, *SUBMIT)
    assert result.returncode == 0, result.stderr
    assert argv is not None
    conf = confs(argv)
    assert conf["spark.driver.extraJavaOptions"] == f"{EMR_JAVA_OPTIONS} {' '.join(CBOR)}"
    assert conf["spark.executor.extraJavaOptions"] == (
        f"{EMR_JAVA_OPTIONS} -verbose:gc {' '.join(CBOR)}"
    )


def test_without_emr_defaults_only_the_pinned_jars_are_set(fakes: Path) -> None:
    (fakes / "spark-defaults.conf").write_text("spark.eventLog.enabled true\n", encoding="utf-8")
    result, argv = launch(fakes, "--jars-dir", "/j", *SUBMIT)
    assert result.returncode == 0, result.stderr
    assert argv is not None
    assert confs(argv)["spark.driver.extraClassPath"] == "/j/*"


def test_running_version_is_stopped_through_the_marker_before_submit(fakes: Path) -> None:
    marker = "s3://data/control/orders-eu-west-1/stop"
    handover = ["--app-name", "streaming-x-eu-west-1", "--stop-marker", marker, "--poll-sec", "0.1"]
    result, argv = launch(fakes, "--jars-dir", "/j", *handover, *SUBMIT, running_polls="3")
    assert result.returncode == 0, result.stderr
    assert argv is not None
    calls = (fakes / "aws.calls").read_text(encoding="utf-8").splitlines()
    assert calls[0].startswith("s3 cp") and calls[0].endswith(f"- {marker}")
    assert calls[-1].startswith("s3 rm") and calls[-1].endswith(marker)
    assert int((fakes / "yarn.calls").read_text(encoding="utf-8")) == 4
    assert "streaming-x-eu-west-1 stopped" in result.stderr


def test_old_version_still_running_after_the_bound_means_no_submit(fakes: Path) -> None:
    marker = "s3://data/control/stop"
    handover = [
        "--app-name", "streaming-x-eu-west-1", "--stop-marker", marker,
        "--stop-timeout-sec", "1", "--poll-sec", "0.2",
    ]  # fmt: skip
    result, argv = launch(fakes, "--jars-dir", "/j", *handover, *SUBMIT, running_polls="always")
    assert result.returncode == 8
    assert argv is None
    assert "still running after 1s" in result.stderr
    calls = (fakes / "aws.calls").read_text(encoding="utf-8").splitlines()
    assert len(calls) == 1 and calls[0].startswith("s3 cp")  # marker left in place


def test_nothing_running_submits_without_writing_a_marker(fakes: Path) -> None:
    result, argv = launch(
        fakes, "--app-name", "streaming-x-eu-west-1", "--stop-marker", "s3://d/stop", *SUBMIT
    )
    assert result.returncode == 0, result.stderr
    assert argv is not None
    calls = (fakes / "aws.calls").read_text(encoding="utf-8").splitlines()
    assert [c.split()[:2] for c in calls] == [["s3", "rm"]]  # a stale marker is cleared
