"""``make run`` of a ``"compute": "serverless"`` instance: the job launched from
the job run the stack would start, by ``spark-submit``.

What comes from where, so that what would fail on EMR Serverless fails here:

* the ``StartJobRun`` request: infra/serverless/job_run.py's one builder
  (:func:`infra.serverless.job_run.start_job_run_request`, the body the stack's
  ``Custom::ServerlessJobRun`` sends and the supervisor resends): its
  ``entryPoint``, ``entryPointArguments`` (``--config ... --platform
  serverless``) and ``sparkSubmitParameters`` (``--py-files app.zip``,
  ``--jars`` the job's jar, the archive's ``--conf`` pairs);
* the application's ``spark-defaults``
  (:func:`infra.serverless.job_run.application_spark_defaults`, the instance's
  serverless shape);
* the job package staged as a deploy stages it (:func:`artifacts.packaging.stage_package`:
  ``app.zip``, ``main.py``, the jar) plus the local job config as
  ``job-config.json``;
* the dependency archive built from the same lock for this machine
  (``build/serverless/local``, :mod:`artifacts.serverless_archive`).

Every ``s3://`` URI of the request is mapped to a local file
(:class:`ArtifactMap`): a URI that maps to no file (a wrong entry point, a
missing jar or archive) stops the launch with the URI and the file it looked
for. The job itself gets nothing but what spark-submit gives it: the repo is
NOT on its ``PYTHONPATH`` (``app`` comes from ``app.zip``), the locked
packages come first from the unpacked archive (``./jobdeps``, as the service
unpacks it in the driver's working directory), and the job, told ``--platform
serverless``, takes every Spark setting from spark-submit.

What differs from the service, and why: the master is ``local[2]`` (one JVM,
no executor containers); the Glue client factory and the service-only
``spark.emr-serverless.*`` keys are dropped (no Glue here: the embedded Derby
metastore and the SQLite Iceberg catalog of every local run); the release's
interpreter path (``/usr/bin/python3.11``) is mapped to this venv's Python of
the same version, whose site-packages come after the archive (they hold what
only local runs use, e.g. the SQLite catalog's driver).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyspark

from artifacts.packaging import JOB_CONFIG_FILE, PACKAGE_ZIP, stage_package
from artifacts.serverless_archive import (
    ARCHIVE_ALIAS,
    ARCHIVE_FILE,
    PACKAGE_ALIAS,
    archive_path,
    archive_spark_conf,
)
from infra.serverless.job_run import (
    JobRunSpec,
    application_spark_defaults,
    restart_budget_split,
    start_job_run_request,
)
from job.driver import local_work_dir
from local.job_process import REPO_ROOT, JobProcess, job_environment, write_config
from model.config import JobConfig
from model.spark_conf import GLUE_HIVE_SITE, local_conf

SHUFFLE_PARTITIONS: Final = "spark.sql.shuffle.partitions"

TARGET: Final = "serverless"
# Stand for the instance's artifact bucket and the archive's content prefix.
LOCAL_BUCKET: Final = "s3://local-artifacts"
SERVICE_ONLY_PREFIX: Final = "spark.emr-serverless."
DRIVER_ENV_PREFIX: Final = "spark.emr-serverless.driverEnv."
EXECUTOR_ENV_PREFIX: Final = "spark.executorEnv."
_INTERPRETER_KEYS: Final = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")
# The job's PYTHONPATH from the environment: the repo must not be on it.
_STRIPPED_ENV: Final = ("PYTHONPATH", "SPARK_HOME", "PYSPARK_SUBMIT_ARGS")


class LaunchError(RuntimeError):
    """The job run cannot be launched locally; the message names what is missing."""


def is_serverless(instance: Any) -> bool:
    return getattr(instance, "compute", "emr") == TARGET


@dataclass(frozen=True)
class ArtifactMap:
    """``s3://`` URI prefixes (or whole URIs) -> the local file or directory."""

    entries: tuple[tuple[str, Path], ...]

    def local(self, uri: str) -> Path:
        for prefix, path in self.entries:
            if uri == prefix:
                found = path
            elif uri.startswith(prefix + "/") and path.is_dir():
                found = path / uri[len(prefix) + 1 :]
            else:
                continue
            if not found.exists():
                raise LaunchError(
                    f"{uri}: maps to {found}, which does not exist: the job run would fail "
                    "on EMR Serverless too (the request names a file the deploy does not stage)"
                )
            return found
        known = ", ".join(prefix for prefix, _ in self.entries)
        raise LaunchError(f"{uri}: not a staged artifact; allowed prefixes: {known}")

    def map_value(self, value: str) -> str:
        """A token, a ``key=value`` or a comma list of ``uri#alias`` with its URIs mapped."""
        if value.startswith("s3://"):
            return ",".join(self._map_one(part) for part in value.split(","))
        key, eq, rest = value.partition("=")
        if eq and rest.startswith("s3://"):
            return key + eq + self.map_value(rest)
        return value

    def _map_one(self, value: str) -> str:
        uri, hash_, alias = value.partition("#")
        return str(self.local(uri)) + hash_ + alias


@dataclass(frozen=True)
class LaunchPlan:
    """A spark-submit command line for the request, and what it came from."""

    request: dict[str, Any]
    spark_defaults: dict[str, str]
    command: list[str]
    env: dict[str, str]
    cwd: Path
    archive: Path

    def describe(self) -> str:
        driver = self.request["jobDriver"]["sparkSubmit"]
        size = self.archive.stat().st_size / 2**20
        return (
            f"target {TARGET}: spark-submit of StartJobRun {self.request['mode']} "
            f"(entry point {driver['entryPoint'].rsplit('/', 1)[-1]}, "
            f"retry maxFailedAttemptsPerHour "
            f"{self.request['retryPolicy']['maxFailedAttemptsPerHour']}); "
            f"archive {self.archive} ({size:.0f} MiB)"
        )


def job_run(
    instance: Any, package_uri: str, archive_uri: str, package_zip_uri: str | None = None
) -> dict[str, Any]:
    """The ``StartJobRun`` body for ``instance`` with local stand-ins for the
    ids and ARNs the stack resolves at deploy (they do not reach the job)."""
    service_attempts, _ = restart_budget_split(instance.supervisor.max_restarts_per_hour)
    spec = JobRunSpec(
        application_id="local-application",
        execution_role_arn="arn:aws:iam::000000000000:role/local-serverless-job",
        name=f"{instance.instance_id}-job",
        package_uri=package_uri,
        max_failed_attempts_per_hour=service_attempts,
        log_group_name=f"/local/{instance.instance_id}",
        archive_conf=archive_spark_conf(
            archive_uri, instance.serverless.python, package_zip_uri=package_zip_uri
        ),
    )
    return start_job_run_request(spec)


def spark_submit() -> Path:
    """The pyspark wheel's ``bin/spark-submit``."""
    path = Path(pyspark.__file__).resolve().parent / "bin" / "spark-submit"
    if not path.is_file():
        raise LaunchError(f"{path}: missing; expected the pyspark wheel's spark-submit")
    return path


def local_interpreter(release_interpreter: str) -> str:
    """This venv's Python for the release's ``/usr/bin/pythonX.Y``, only if the
    versions agree (the archive's compiled wheels are for that version)."""
    mine = f"python{sys.version_info.major}.{sys.version_info.minor}"
    if not release_interpreter.endswith(mine):
        raise LaunchError(
            f"the job run's interpreter is {release_interpreter}, this machine's venv runs "
            f"{mine}: the local archive is built for {mine}; allowed: a release Python of the "
            "same version"
        )
    return sys.executable


def _extract(archive: Path, target: Path) -> None:
    target.mkdir(parents=True)
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(target)
    else:
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(target, filter="data")


def unpacked(archive: Path, cache: Path, *, prune: bool = False) -> Path:
    """``archive`` (tar.gz or zip) unpacked as the service unpacks
    ``spark.archives``, once per version (its size and time) in ``cache``.
    Safe side by side: each process unpacks into its own directory and renames
    it into place, and a version is used only once whole (a loser of the race
    drops its copy). A version is never unpacked over another: a job of the
    other version may still run from it (a handover). ``prune`` removes the
    archive's older versions: for the dependency archive, 100+ MiB and one per
    build, unpacked beside it for every work directory (each e2e case has its
    own; unpacking it per work directory cost every serverless case 5-8 s)."""
    stat = archive.stat()
    target = cache / f"{archive.name}-{stat.st_size}-{stat.st_mtime_ns}"
    if target.is_dir():
        return target
    partial = cache / f".{target.name}.{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    _extract(archive, partial)
    try:
        partial.rename(target)
    except OSError:
        if not target.is_dir():
            raise
        shutil.rmtree(partial, ignore_errors=True)
    if prune:
        for old in cache.glob(f"{archive.name}-*"):
            if old != target:
                shutil.rmtree(old, ignore_errors=True)
    return target


def working_directory(
    cwd: Path, archives: dict[str, Path], shared: Path, beside: frozenset[str] = frozenset()
) -> None:
    """``cwd/<alias>`` for each archive, unpacked under ``shared`` once and
    linked; the aliases in ``beside`` are unpacked in ``unpacked/`` beside
    their archive instead, for every work directory (:func:`unpacked`)."""
    cwd.mkdir(parents=True, exist_ok=True)
    for alias, archive in archives.items():
        if alias in beside:
            found = unpacked(archive, archive.parent / "unpacked", prune=True)
        else:
            found = unpacked(archive, shared / alias)
        link = cwd / alias
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(found, target_is_directory=True)


def _local_defaults(defaults: dict[str, str], work_dir: str, scratch: Path) -> dict[str, str]:
    """The application's defaults less what only the service or Glue reads,
    plus what a local run needs (model.spark_conf.local_conf less its jar: the
    jar comes from the request's ``--jars``)."""
    glue = {f"spark.hadoop.{key}" for key in GLUE_HIVE_SITE}
    conf = {
        key: value
        for key, value in defaults.items()
        if not key.startswith(SERVICE_ONLY_PREFIX) and key not in glue
    }
    local = local_conf(work_dir)
    local.pop("spark.jars", None)
    # The state's partitions are the instance's (its checkpoint's count), not
    # the laptop sizing's: the requests a batch makes follow them.
    local.pop(SHUFFLE_PARTITIONS, None)
    conf.update(local)
    conf["spark.local.dir"] = str(scratch)
    return conf


def plan(
    instance: Any,
    config: JobConfig,
    root: Path,
    base_env: dict[str, str],
    spark_overrides: Mapping[str, str] | None = None,
) -> LaunchPlan:
    """Stage the package, map the request's URIs, and build the command line.
    ``spark_overrides``: local settings on top (the sizing bench's
    ``spark.master`` ``local[1]``: the shape's one executor core)."""
    serverless = root / "serverless"
    launches = serverless / "packages"
    launches.mkdir(parents=True, exist_ok=True)
    config_text = config.to_json()
    staged, digest = stage_package(REPO_ROOT, launches, config_text)
    write_config(config, staged / JOB_CONFIG_FILE)
    archive = archive_path("local")
    package_uri = f"{LOCAL_BUCKET}/job-package-{digest}"
    archive_uri = f"{LOCAL_BUCKET}/job-python-deps/{ARCHIVE_FILE}"
    artifacts = ArtifactMap(((package_uri, staged), (archive_uri, archive)))
    request = job_run(instance, package_uri, archive_uri, f"{package_uri}/{PACKAGE_ZIP}")
    defaults = application_spark_defaults(instance.serverless, instance.shuffle_partitions)
    driver = request["jobDriver"]["sparkSubmit"]

    # The driver's working directory, with spark.archives unpacked in it.
    cwd = serverless / f"run-{digest}"
    working_directory(
        cwd,
        {ARCHIVE_ALIAS: archive, PACKAGE_ALIAS: staged / PACKAGE_ZIP},
        serverless / "unpacked",
        beside=frozenset({ARCHIVE_ALIAS}),
    )
    work_dir = local_work_dir(config, None)
    if work_dir is None:
        raise LaunchError(f"checkpoint {config.checkpoint_location}: expected a local path")

    env = job_environment(base_env, config.region)
    for key in _STRIPPED_ENV:
        env.pop(key, None)
    conf = _local_defaults(defaults, work_dir, serverless / "spark-local")
    conf.update(spark_overrides or {})
    params: list[str] = []
    tokens = shlex.split(driver["sparkSubmitParameters"])
    for flag, value in zip(tokens[::2], tokens[1::2], strict=True):
        key, _, setting = value.partition("=")
        if flag == "--conf" and key.startswith(DRIVER_ENV_PREFIX):
            # The service sets these in the driver's environment; here the
            # driver is the spark-submit process (client mode).
            name = key[len(DRIVER_ENV_PREFIX) :]
            env[name] = local_interpreter(setting) if name in _INTERPRETER_KEYS else setting
        elif flag == "--conf" and key == EXECUTOR_ENV_PREFIX + "PYSPARK_PYTHON":
            params += [flag, f"{key}={local_interpreter(setting)}"]
        else:
            params += [flag, artifacts.map_value(value)]
    command = [str(spark_submit())]
    for key, value in sorted(conf.items()):
        command += ["--conf", f"{key}={value}"]
    command += params
    command.append(str(artifacts.local(driver["entryPoint"])))
    command += [artifacts.map_value(arg) for arg in driver["entryPointArguments"]]
    return LaunchPlan(request, defaults, command, env, cwd, archive)


def start(
    instance: Any,
    config: JobConfig,
    config_path: Path,
    log_path: Path,
    spark_overrides: Mapping[str, str] | None = None,
) -> JobProcess:
    """Launch the job run's spark-submit as a :class:`JobProcess` (its own
    process group: a crash test kills the driver, its JVM and workers at once).
    ``config_path`` (the run's copy of the config, read by the local tools)
    is written too; its directory is the instance's root."""
    write_config(config, config_path)
    launch = plan(instance, config, config_path.parent, dict(os.environ), spark_overrides)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("ab")
    log.write(f"\n===== start {time.strftime('%H:%M:%S')} {launch.describe()} =====\n".encode())
    log.write((" ".join(shlex.quote(part) for part in launch.command) + "\n").encode())
    log.flush()
    process = subprocess.Popen(
        launch.command,
        cwd=str(launch.cwd),
        env=launch.env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    return JobProcess(config, config_path, log_path, process, log)


def start_job_process(
    instance: Any, config: JobConfig, config_path: Path, log_path: Path
) -> JobProcess:
    """The hook of :class:`local.harness.LocalInstance`: a serverless instance
    launches through its job run, any other as EMR's step does."""
    if is_serverless(instance):
        return start(instance, config, config_path, log_path)
    return JobProcess.start(config, config_path, log_path)


def describe(instance: Any) -> str:
    """The run's target for the summary: the serverless launch and its archive,
    or EMR's ``python -m job``."""
    if not is_serverless(instance):
        return "target emr: python -m job (the EMR step's main())"
    try:
        archive = archive_path("local")
    except Exception as exc:
        return f"target {TARGET}: {exc}"
    return (
        f"target {TARGET}: spark-submit of the StartJobRun request "
        f"(infra/serverless/job_run.py); archive {archive}"
    )
