"""The EMR step that runs the streaming job: ONE builder for CDK and for redeploy.

``cdk deploy`` (``AWS::EMR::Step``) and ``python -m scripts.redeploy``
(``add_job_flow_steps``) both submit :func:`build_step` of the same
:class:`StepSpec`, so a redeploy cannot start the job differently from a deploy.
The construct publishes the spec as a stack output; redeploy reads it back.

Choices the step encodes (docs/deploy.md has the long form):

* ``command-runner.jar`` runs ``streaming-spark-submit`` (bootstrap/), which
  finds a running version by the job's lease in S3 (whatever cluster runs it),
  stops it through the stop marker, waits a bounded time for the lease, and
  then runs ``spark-submit --deploy-mode cluster`` with the pinned jars *first*
  on ``spark.{driver,executor}.extraClassPath`` followed by EMR's own value read
  from the node's ``spark-defaults.conf`` (never dropped, never hard-coded).
* ``spark.yarn.submit.waitAppCompletion=false``: the step ends once YARN accepts
  the application. A streaming job never ends, and a step that never ends would
  block the cluster's step queue (and a CloudFormation step resource).
* ``ActionOnFailure=CONTINUE``: a failed submission must not terminate a
  long-running cluster (its state, logs and the next redeploy live there);
  CloudFormation accepts only CONTINUE or CANCEL_AND_WAIT for this resource.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Final, Literal

from artifacts.packaging import ENTRY_POINT, JOB_CONFIG_FILE, PACKAGE_ZIP
from emr.releases import DEFAULT_RELEASE_LABEL, release_for
from model import contract
from model.config import JobConfig
from model.jvm import JAR_NAME as JOB_JAR
from model.lease import lease_path

ActionOnFailure = Literal["CONTINUE", "CANCEL_AND_WAIT"]

COMMAND_RUNNER: Final = "command-runner.jar"
LAUNCHER_PATH: Final = "/usr/local/bin/streaming-spark-submit"
JARS_DIR: Final = "/opt/streaming/jars"
# After the job's driver exits, YARN still releases containers and marks the
# application finished: the launcher's wait allows for that on top of the job's
# own graceful stop bound.
YARN_TEARDOWN_SEC: Final = 120


def stop_timeout_for(graceful_stop_timeout_sec: int) -> int:
    """The launcher's handover wait for a job that stops within ``graceful_stop_timeout_sec``."""
    return graceful_stop_timeout_sec + YARN_TEARDOWN_SEC


UNVERIFIED: Final = "UNVERIFIED"
# Stack outputs the construct publishes and scripts/redeploy.py reads back.
STEP_SPEC_OUTPUT: Final = "JobStepSpec"
CLUSTER_ID_OUTPUT: Final = "JobClusterId"

# SDK v2 reads aws.cborEnabled, SDK v1 com.amazonaws.sdk.disableCbor: with CBOR
# off the Kinesis client speaks JSON and never loads jackson-dataformat-cbor.
CBOR_OFF_JAVA_OPTIONS: Final = ("-Daws.cborEnabled=false", "-Dcom.amazonaws.sdk.disableCbor=true")

_COORDINATES = re.compile(r"^(?P<group>[\w.-]+):(?P<artifact>[\w.-]+):(?P<version>[\w.-]+)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class LockedJar:
    group: str
    artifact: str
    version: str
    sha256: str | None  # None: UNVERIFIED in the lock
    verified_from: str

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def repository_path(self) -> str:
        """Maven layout: the source URL is ``<repository base>/<this>``."""
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"


def parse_jar_lock(text: str, source: str = "jars.lock") -> tuple[LockedJar, ...]:
    """Parse ``bootstrap/jars.lock`` (the format install_jars.sh reads)."""
    jars: list[LockedJar] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            raise ValueError(
                f"{source} line {number}: expected 'coordinates sha256 verified_from', got {raw!r}"
            )
        coordinates, sha, verified_from = parts
        found = _COORDINATES.fullmatch(coordinates)
        if found is None:
            raise ValueError(
                f"{source} line {number}: coordinates {coordinates!r}; "
                "allowed: groupId:artifactId:version"
            )
        if sha != UNVERIFIED and not _SHA256.fullmatch(sha):
            raise ValueError(
                f"{source} line {number}: sha256 {sha!r}; allowed: 64 lowercase hex or {UNVERIFIED}"
            )
        jars.append(
            LockedJar(
                group=found["group"],
                artifact=found["artifact"],
                version=found["version"],
                sha256=None if sha == UNVERIFIED else sha,
                verified_from=verified_from,
            )
        )
    if not jars:
        raise ValueError(f"{source}: no jar entries")
    return tuple(jars)


def read_jar_lock(path: str | Path) -> tuple[LockedJar, ...]:
    return parse_jar_lock(Path(path).read_text(encoding="utf-8"), str(path))


class JobPackage:
    """The files of one job version under ``package_uri`` and the spark-submit
    arguments that load them: ONE layout for the EMR step (:class:`StepSpec`)
    and the EMR Serverless run (``infra.serverless.job_run.JobRunSpec``)."""

    package_uri: str

    def file_uri(self, name: str) -> str:
        """The URI of the package's file ``name``."""
        return f"{self.package_uri}/{name}"

    @property
    def config_uri(self) -> str:
        return self.file_uri(JOB_CONFIG_FILE)

    @property
    def entry_point(self) -> str:
        return self.file_uri(ENTRY_POINT)

    @property
    def config_arguments(self) -> list[str]:
        """The entry point's arguments that name the job's configuration."""
        return ["--config", self.config_uri]

    def package_arguments(self, jars_before: Sequence[str] = ()) -> list[str]:
        """``--py-files`` with ``app.zip`` and ``--jars`` with ``jars_before``
        followed by the job's jar (it is job code and travels with its version)."""
        return [
            "--py-files",
            self.file_uri(PACKAGE_ZIP),
            "--jars",
            ",".join([*jars_before, self.file_uri(JOB_JAR)]),
        ]


@dataclass(frozen=True)
class StepSpec(JobPackage):
    """Everything the step depends on. Values may be CDK string tokens (the
    bucket name) at synth time; redeploy gets them resolved from the stack output.

    ``package_uri`` is the versioned S3 prefix holding ``app.zip``, ``main.py``,
    the job's jar and ``job-config.json``: a new version never overwrites files a running job
    (or a YARN container it restarts) still localizes.
    """

    step_name: str
    app_name: str
    package_uri: str
    stop_marker_uri: str
    jar_files: tuple[str, ...]
    # The job's checkpoint: the launcher reads the lease there (an old version
    # runs while it is held) and records its own exit 8 beside it. Empty: no
    # handover (a spec from before the lease-based handover).
    checkpoint_uri: str = ""
    # Defaults from the models: the default release's first Python, the job's
    # default graceful stop bound (a spec built in code; the stack passes both).
    python: str = release_for(DEFAULT_RELEASE_LABEL).pythons[0]
    jars_dir: str = JARS_DIR
    disable_cbor: bool = False
    stop_timeout_sec: int = stop_timeout_for(
        JobConfig.model_fields["graceful_stop_timeout_sec"].default
    )
    action_on_failure: ActionOnFailure = "CONTINUE"

    def __post_init__(self) -> None:
        if not self.jar_files:
            raise ValueError("jar_files: empty; allowed: the file names of the locked jars")
        for name in self.jar_files:
            if "/" in name or not name.endswith(".jar"):
                raise ValueError(f"jar_files: {name!r}; allowed: a bare '<artifact>-<v>.jar'")
        if self.stop_timeout_sec <= 0:
            raise ValueError(f"stop_timeout_sec: {self.stop_timeout_sec}; allowed: > 0")
        if self.action_on_failure not in ("CONTINUE", "CANCEL_AND_WAIT"):
            raise ValueError(
                f"action_on_failure: {self.action_on_failure!r}; allowed: CONTINUE, CANCEL_AND_WAIT"
            )

    def to_dict(self) -> dict[str, Any]:
        raw = asdict(self)
        raw["jar_files"] = list(self.jar_files)
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> StepSpec:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"step spec: unknown field {unknown[0]!r}; allowed: {sorted(known)}")
        values = dict(raw)
        if "jar_files" in values:
            values["jar_files"] = tuple(values["jar_files"])
        return cls(**values)


def build_step(spec: StepSpec) -> dict[str, Any]:
    """The step in the shape ``add_job_flow_steps(Steps=[...])`` takes; the CDK
    construct maps the same dict onto ``AWS::EMR::Step``."""
    jars_dir = spec.jars_dir.rstrip("/")
    launcher: list[str] = [LAUNCHER_PATH, "--jars-dir", jars_dir]
    if spec.disable_cbor:
        for option in CBOR_OFF_JAVA_OPTIONS:
            launcher += ["--java-option", option]
    if spec.checkpoint_uri:
        launcher += [
            "--lease",
            lease_path(spec.checkpoint_uri),
            "--exit-record",
            contract.exit_record_path(spec.checkpoint_uri),
        ]
    launcher += [
        "--app-name",
        spec.app_name,
        "--stop-marker",
        spec.stop_marker_uri,
        "--stop-timeout-sec",
        str(spec.stop_timeout_sec),
    ]
    submit = [
        "spark-submit",
        "--master",
        "yarn",
        "--deploy-mode",
        "cluster",
        "--name",
        spec.app_name,
        # local: the bootstrap installed the pinned jars on every node.
        *spec.package_arguments([f"local:{jars_dir}/{n}" for n in spec.jar_files]),
        "--conf",
        "spark.yarn.submit.waitAppCompletion=false",
        "--conf",
        f"spark.yarn.appMasterEnv.PYSPARK_PYTHON={spec.python}",
        "--conf",
        f"spark.executorEnv.PYSPARK_PYTHON={spec.python}",
        spec.entry_point,
        *spec.config_arguments,
    ]
    return {
        "Name": spec.step_name,
        "ActionOnFailure": spec.action_on_failure,
        "HadoopJarStep": {"Jar": COMMAND_RUNNER, "Args": [*launcher, "--", *submit]},
    }
