"""Builds the job's deploy artifacts from the repository: offline, and the same
sources always give the same bytes and the same content hash.

Two staged directories, hashed separately because the cluster and the job
change at different speeds (``infra.constructs.job_deployment`` uploads them):

* :func:`stage_bootstrap`: the bootstrap scripts, their shell library and the
  locks. Its hash names the S3 prefix the cluster's bootstrap actions point at.
* :func:`stage_package`: ``app.zip`` (:func:`zip_package`), the entry point and
  the job's JVM jar (:mod:`artifacts.job_jar`); its hash (which
  also covers the job config) is the job version.

Plain functions of files: no CDK here, so tests and tools can build and inspect
exactly what a deploy ships without synthesizing a stack.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from artifacts import job_jar
from model.jvm import JAR_NAME as JOB_JAR

# The job package's files, as the EMR step and the serverless run name them
# (infra/emr_step.py, infra/serverless/job_run.py): the modules' zip, the
# spark-submit entry point, and the job's config beside them.
PACKAGE_ZIP: Final = "app.zip"
ENTRY_POINT: Final = "main.py"
JOB_CONFIG_FILE: Final = "job-config.json"
# The repository the staged files come from (the constructs' default source root).
REPO_ROOT: Final = job_jar.ROOT
# The bootstrap actions' shared shell helpers; each action downloads it first.
BOOTSTRAP_LIB: Final = "bootstrap-lib.sh"
# Relative to the repository root; staged flat (by file name) under one prefix.
BOOTSTRAP_FILES: Final = (
    f"bootstrap/{BOOTSTRAP_LIB}",
    "bootstrap/install_python_deps.sh",
    "bootstrap/install_jars.sh",
    "bootstrap/streaming-spark-submit.sh",
    "bootstrap/jars.lock",
    "job/requirements.lock",
)
# Top-level files of the package that are entry points, not imported modules:
# main.py travels beside app.zip (spark-submit runs it as a script) and
# __main__.py is the local ``python -m job``. Neither belongs in the zip.
ENTRY_SCRIPTS: Final = (ENTRY_POINT, "__main__.py")
_ZIP_EPOCH: Final = (1980, 1, 1, 0, 0, 0)


# The packages app.zip carries: the job and the model it imports.
JOB_PACKAGES: Final = ("job", "model")


def zip_package(root: Path, packages: tuple[str, ...] = JOB_PACKAGES) -> bytes:
    """The packages' modules as one zip for ``--py-files``: ``*.py`` files only
    (no caches, no locks or data files), minus the job's entry scripts, with
    fixed timestamps and order so an unchanged job is not a new version.

    Only what runs on EMR belongs here; ``tests/deploy/test_app_package.py``
    compares the result with the modules the entry point imports."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        paths = sorted(path for name in packages for path in (root / name).rglob("*.py"))
        for path in paths:
            relative = path.relative_to(root)
            if not path.is_file() or "__pycache__" in relative.parts:
                continue
            if relative.parent.name == "job" and relative.name in ENTRY_SCRIPTS:
                continue
            info = zipfile.ZipInfo(str(relative), _ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def stage_bootstrap(root: Path, stage_dir: Path) -> tuple[Path, str]:
    """Copy :data:`BOOTSTRAP_FILES` of ``root`` into ``stage_dir`` under their
    content hash; returns the directory and the hash."""
    files = {Path(rel).name: (root / rel).read_bytes() for rel in BOOTSTRAP_FILES}
    digest = content_digest(files)
    target = stage_dir / f"job-bootstrap-{digest}"
    _write_once(target, files)
    return target, digest


def stage_package(root: Path, stage_dir: Path, config_text: str) -> tuple[Path, str]:
    """``app.zip`` for ``--py-files``, the ``main.py`` entry point and the
    de-duplication jar for ``--jars`` (built if the checkout has not yet); the
    version hash also covers the (token-resolved) job config, so a config change
    is a new version too."""
    entry = root / "job" / ENTRY_POINT
    if not entry.is_file():
        raise ValueError(f"{entry}: missing; allowed: the job's spark-submit entry point")
    files = {
        PACKAGE_ZIP: zip_package(root),
        ENTRY_POINT: entry.read_bytes(),
        JOB_JAR: job_jar.current(root).read_bytes(),
    }
    digest = content_digest({**files, JOB_CONFIG_FILE: config_text.encode()})
    target = stage_dir / f"job-package-{digest}"
    _write_once(target, files)
    return target, digest


def content_digest(files: dict[str, bytes]) -> str:
    """Short SHA-256 over names and contents: the S3 prefix of a version."""
    sha = hashlib.sha256()
    for name in sorted(files):
        sha.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return sha.hexdigest()[:16]


def _write_once(target: Path, files: dict[str, bytes]) -> None:
    if target.is_dir():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for name, content in files.items():
        (target / name).write_bytes(content)


# The supervisor Lambda's code (infra/supervisor/handler.py and its serverless
# target, infra/supervisor/serverless.py) and the import-light modules it uses,
# staged with their package paths: of the component's package, its runtime
# modules only (not construct.py, which imports the CDK, nor status.py, which
# the function does not run); the Lambda runtime brings boto3
# (https://docs.aws.amazon.com/lambda/latest/dg/lambda-python.html).
# tests/infra/supervisor/test_package.py imports the handler from the staged
# copy alone, so a new import of one of these fails there, not in AWS.
SUPERVISOR_FILES: Final = (
    "model/__init__.py",
    "model/contract.py",
    "model/exit_record.py",
    "model/job_version.py",
    "model/lease.py",
    "model/polling.py",
    "model/storage_uri.py",
    "infra/__init__.py",
    "infra/s3_keys.py",
    "infra/supervisor/__init__.py",
    "infra/supervisor/decision.py",
    "infra/supervisor/handler.py",
    "infra/supervisor/metrics.py",
    "infra/supervisor/serverless.py",
)
SUPERVISOR_HANDLER: Final = "infra.supervisor.handler.handler"


def stage_files(
    root: Path,
    stage_dir: Path,
    prefix: str,
    paths: tuple[str, ...],
    sources: Mapping[str, str] | None = None,
) -> Path:
    """Copy ``paths`` (relative to ``root``) to ``stage_dir/<prefix>-<content hash>``,
    replacing what a previous synth left there; the Lambda handlers' assets.
    ``sources`` maps a path of the asset to the file it is read from where the
    two differ: a handler whose import path (the function's ``Handler``) is not
    its place in the repository."""
    where = sources or {}
    files = {rel: (root / where.get(rel, rel)).read_bytes() for rel in paths}
    target = stage_dir / f"{prefix}-{content_digest(files)}"
    if target.is_dir():
        shutil.rmtree(target)
    for rel, content in files.items():
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        (target / rel).write_bytes(content)
    return target


def stage_supervisor(root: Path, stage_dir: Path) -> Path:
    """Copy :data:`SUPERVISOR_FILES` under ``stage_dir`` by content hash."""
    return stage_files(root, stage_dir, "supervisor", SUPERVISOR_FILES)
