"""bootstrap/streaming-spark-submit.sh with fake spark-submit, yarn and aws.

The launcher must keep every EMR default on the classpath (pinned jars first,
EMR's entries after, in order), append the CBOR switch to EMR's Java options
rather than replace them, and stop the running version through the stop marker
before submitting when the job's lease in S3 is held (whatever cluster runs
the old version), giving up (without submitting) after a bounded wait.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from model import contract
from model.exit_record import ExitRecord

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
    running: the launcher must not ask it) and aws (records calls; the lease
    reads as held and fresh for LEASE_HELD_READS reads, then as absent; written
    objects land in FAKE_DIR/put.<name>)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scripts = {
        "spark-submit": 'printf "%s\\0" "$@" > "$FAKE_DIR/submit.argv"\n',
        "yarn": (
            'echo called >> "$FAKE_DIR/yarn.calls"\n'
            'printf "%s\\t%s\\t%s\\n" application_1_0001 streaming-x-eu-west-1 RUNNING\n'
        ),
        "aws": (
            'echo "$*" >> "$FAKE_DIR/aws.calls"\n'
            'src="${*: -2:1}"; dst="${*: -1}"\n'
            'if [ "$1 $2" = "s3 cp" ] && [ "$dst" = - ]; then\n'
            '  if [ "${LEASE_ERROR:-}" != "" ]; then echo "$LEASE_ERROR" >&2; exit 1; fi\n'
            '  n=$(cat "$FAKE_DIR/lease.reads" 2>/dev/null || echo 0); n=$((n + 1))\n'
            '  echo "$n" > "$FAKE_DIR/lease.reads"\n'
            '  if [ "$LEASE_HELD_READS" = always ] || [ "$n" -le "$LEASE_HELD_READS" ]; then\n'
            "    expires=$(( $(date +%s) + ${LEASE_EXPIRES_IN:-60} ))\n"
            '    echo "{\\"owner\\": \\"old-host:1\\", \\"expires_at\\": $expires.25}"\n'
            "    exit 0\n"
            "  fi\n"
            '  echo "fatal error: An error occurred (404) when calling the HeadObject operation:'
            ' Key \\"$src\\" does not exist" >&2\n'
            "  exit 1\n"
            "fi\n"
            'if [ "$1 $2" = "s3 cp" ] && [ "$src" = - ]; then\n'
            '  cat > "$FAKE_DIR/put.${dst##*/}"\n'
            "fi\n"
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
    fakes: Path, *args: str, held_reads: str = "0", **env_extra: str
) -> tuple[subprocess.CompletedProcess[str], list[str] | None]:
    env = {
        **os.environ,
        "PATH": f"{fakes / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "FAKE_DIR": str(fakes),
        "LEASE_HELD_READS": held_reads,
        **env_extra,
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


LEASE = "s3://data/checkpoints/orders-eu-west-1/_lease"
EXIT_RECORD = "s3://data/checkpoints/orders-eu-west-1/_exit"
MARKER = "s3://data/control/orders-eu-west-1/stop"
HANDOVER = [
    "--app-name", "streaming-x-eu-west-1", "--lease", LEASE, "--exit-record", EXIT_RECORD,
    "--stop-marker", MARKER, "--poll-sec", "0.1",
]  # fmt: skip


def _calls(fakes: Path) -> list[str]:
    return (fakes / "aws.calls").read_text(encoding="utf-8").splitlines()


def test_a_held_lease_is_handed_over_through_the_marker_before_submit(fakes: Path) -> None:
    """The old version runs on another cluster: this cluster's YARN is never
    asked; the lease in S3 says an old version runs."""
    result, argv = launch(fakes, "--jars-dir", "/j", *HANDOVER, *SUBMIT, held_reads="3")
    assert result.returncode == 0, result.stderr
    assert argv is not None
    calls = _calls(fakes)
    assert calls[0].endswith(f"{LEASE} -"), "the lease is read first"
    assert calls[1].startswith("s3 cp") and calls[1].endswith(f"- {MARKER}")
    assert (fakes / "put.stop").read_text(encoding="utf-8").startswith("handover requested ")
    assert calls[-1].startswith("s3 rm") and calls[-1].endswith(MARKER)
    assert int((fakes / "lease.reads").read_text(encoding="utf-8")) == 4
    assert "released" in result.stderr
    assert not (fakes / "yarn.calls").exists(), "the decision is the lease's, not YARN's"


def test_old_version_holding_the_lease_after_the_bound_means_no_submit(fakes: Path) -> None:
    bound = ["--stop-timeout-sec", "1"]
    result, argv = launch(
        fakes, "--jars-dir", "/j", *HANDOVER, *bound, *SUBMIT, held_reads="always"
    )
    assert result.returncode == 8
    assert argv is None
    assert "still holds" in result.stderr and "NOT submitted" in result.stderr
    assert not any(c.startswith("s3 rm") for c in _calls(fakes)), "marker left in place"
    record = ExitRecord.from_json((fakes / "put._exit").read_text(encoding="utf-8"))
    assert (record.code, record.reason) == (8, contract.EXIT_HANDOVER_TIMEOUT)
    assert "after 1s" in record.detail


def test_nothing_holding_the_lease_submits_without_writing_a_marker(fakes: Path) -> None:
    result, argv = launch(fakes, *HANDOVER, *SUBMIT)
    assert result.returncode == 0, result.stderr
    assert argv is not None
    assert [c.split()[:2] for c in _calls(fakes)] == [["s3", "cp"], ["s3", "rm"]]
    assert not (fakes / "put.stop").exists(), "only a stale marker is cleared"


def test_an_expired_lease_is_free(fakes: Path) -> None:
    """A killed holder stops renewing: its lease expires and the job takes it over."""
    result, argv = launch(fakes, *HANDOVER, *SUBMIT, held_reads="always", LEASE_EXPIRES_IN="-5")
    assert result.returncode == 0, result.stderr
    assert argv is not None
    assert not (fakes / "put.stop").exists()


def test_an_unreadable_lease_submits_nothing(fakes: Path) -> None:
    error = "An error occurred (403) when calling the GetObject operation: Forbidden"
    result, argv = launch(fakes, *HANDOVER, *SUBMIT, LEASE_ERROR=error)
    assert result.returncode == 9
    assert argv is None
    assert "Forbidden" in result.stderr and "cannot read the lease" in result.stderr
