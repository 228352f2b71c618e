"""The job's Python dependencies for EMR Serverless, as one archive.

Why an archive: EMR Serverless has no bootstrap actions, so the locked
packages that ``bootstrap/install_python_deps.sh`` installs on every EMR node
ship instead as ``spark.archives`` (UG "Using Python libraries with EMR
Serverless",
https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/using-python-libraries.html),
which the service unpacks into the working directory of the driver and of
every executor under the alias after ``#``.

What is in it: the packages of ``job/requirements.lock`` (the SAME hashed lock
as on EMR), installed with ``pip install --target`` from wheels that ``pip
download --require-hashes --only-binary=:all:`` fetched for the target
platform. Nothing else: no interpreter and no virtualenv. The release's own
interpreter runs the job (``PYSPARK_PYTHON``) and finds the packages through
``PYTHONPATH`` (:func:`archive_spark_conf`). A packed virtualenv would carry
the build machine's interpreter paths and symlinks; users report such archives
failing on the service
(https://github.com/aws-samples/emr-serverless-samples/issues/16,
https://github.com/aws-samples/emr-serverless-samples/issues/56), and a
site-packages directory has neither.

The target: ``emr-spark-8.1.0`` on ARM64. Its release page lists Python 3.11
and 3.13 ("AWS runtime for Apache Spark (emr-spark-8.1.0)", application
versions,
https://docs.aws.amazon.com/emr/latest/ReleaseGuide/emr-spark810-release.html;
not 3.12). The job runs on the release's first listed Python
(:mod:`emr.releases`, the same interpreter as the EMR cluster's), 3.11, the
Python the lock is compiled for. AL2023 has glibc 2.34, so manylinux wheels up
to ``manylinux_2_34`` run there; pip expands no ``manylinux_2_*`` tag into the
older ones, so every tag from 2_17 up is passed.

Two platforms: ``aarch64`` (what deploys) and ``local`` (this machine's
platform, for ``make run`` of a serverless instance: the same lock through the
same code path). ``make install`` builds both (``python -m
artifacts.serverless_archive --platform aarch64``); a rebuild first tries the
wheels already downloaded (``build/serverless/<platform>/wheels``, offline,
hash-checked) and goes to the index only for what is missing; the bytes of an
unchanged lock are the same archive (fixed order, times and owners).
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from emr.releases import release_for

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
ARCHIVE_FILE: Final = "job-python-deps.tar.gz"
# The directory the service unpacks the archive into (``spark.archives`` URI#alias).
ARCHIVE_ALIAS: Final = "jobdeps"
# The job's own app.zip, unpacked beside it (archive_spark_conf's package_zip_uri).
PACKAGE_ALIAS: Final = "jobapp"
LOCK: Final = "job/requirements.lock"
BUILD_DIR: Final = "build/serverless"
SERVERLESS_RELEASE: Final = "emr-spark-8.1.0"
# AL2023 (the release's OS) has glibc 2.34; pip does not expand manylinux_2_X.
_GLIBC_MINORS: Final = range(34, 16, -1)


class ArchiveError(RuntimeError):
    """The archive is missing or could not be built."""


@dataclass(frozen=True)
class Target:
    """Whom the wheels are for: ``python`` as "3.11"; ``platforms`` pip's
    ``--platform`` tags, empty for this machine's own tags."""

    name: str
    python: str
    platforms: tuple[str, ...]

    @property
    def abi(self) -> str:
        return "cp" + self.python.replace(".", "")

    def pip_target_args(self) -> list[str]:
        if not self.platforms:
            return []
        args = ["--python-version", self.python, "--implementation", "cp", "--abi", self.abi]
        for platform in self.platforms:
            args += ["--platform", platform]
        return args


def release_python(label: str = SERVERLESS_RELEASE) -> str:
    """The interpreter the job runs on for ``label`` (its first listed Python)."""
    return release_for(label).pythons[0]


def _version_of(interpreter: str) -> str:
    match = re.search(r"python(\d+\.\d+)$", interpreter)
    if match is None:
        raise ArchiveError(f"cannot tell the Python version of {interpreter!r}")
    return match.group(1)


def aarch64_platform_tags() -> tuple[str, ...]:
    tags = tuple(f"manylinux_2_{minor}_aarch64" for minor in _GLIBC_MINORS)
    return (*tags, "manylinux2014_aarch64")


def target(platform: str) -> Target:
    """``aarch64``: the release's Python on ARM64; ``local``: this interpreter."""
    if platform == "aarch64":
        return Target("aarch64", _version_of(release_python()), aarch64_platform_tags())
    if platform == "local":
        return Target("local", f"{sys.version_info.major}.{sys.version_info.minor}", ())
    raise ArchiveError(f"platform {platform!r} is not known; allowed: aarch64, local")


def platform_dir(platform: str, root: Path = REPO_ROOT) -> Path:
    return root / BUILD_DIR / platform


def archive_path(platform: str, root: Path = REPO_ROOT) -> Path:
    """``build/serverless/<platform>/job-python-deps.tar.gz``; raises
    :class:`ArchiveError` naming ``make install`` when it was not built."""
    target(platform)  # a clear error for an unknown platform
    path = platform_dir(platform, root) / ARCHIVE_FILE
    if not path.is_file():
        raise ArchiveError(
            f"{path} is missing: run `make install` (it builds the job's Python "
            f"dependency archive for {platform}: python -m artifacts.serverless_archive "
            f"--platform {platform})"
        )
    return path


def archive_spark_conf(
    archive_uri: str, python: str | None = None, *, package_zip_uri: str | None = None
) -> dict[str, str]:
    """The Spark settings that make the release's interpreter import the archive's
    packages: ``spark.archives`` ``<uri>#jobdeps`` (unpacked to ``./jobdeps`` in
    the working directory of the driver and of each executor), and through
    ``spark.emr-serverless.driverEnv.*`` (the driver) and ``spark.executorEnv.*``
    (the executors) ``PYSPARK_PYTHON`` (the release's interpreter, default
    :func:`release_python`) and ``PYTHONPATH`` (the unpacked directory). UG "Spark
    job properties" (jobs-spark) names the two environment prefixes:
    https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/jobs-spark.html

    ``package_zip_uri`` (the job's ``app.zip``): also unpacked, to ``./jobapp``,
    and put on the same ``PYTHONPATH``. ``--py-files`` alone is not enough for
    this job: its Kinesis source is a Python streaming data source, whose
    planner runs in a Python process the driver's JVM starts with the JVM's own
    ``PYTHONPATH`` (Spark's PythonStreamingSourceRunner), where ``--py-files``
    is not (local spark-submit fails with "No module named 'app'"; YARN's
    cluster mode happens to put the py-files there, EMR Serverless does not
    document it). The archives' working-directory unpacking is the one
    mechanism both the dependencies and the code then rely on."""
    uris = [archive_uri] + ([package_zip_uri] if package_zip_uri else [])
    if any(not uri or "#" in uri or "," in uri for uri in uris):
        raise ArchiveError(
            f"archive URIs {uris!r}: expected locations without '#' or ',' "
            "(the aliases are added here)"
        )
    interpreter = python or release_python()
    archives = [f"{archive_uri}#{ARCHIVE_ALIAS}"]
    paths = [f"./{ARCHIVE_ALIAS}"]
    if package_zip_uri:
        archives.append(f"{package_zip_uri}#{PACKAGE_ALIAS}")
        paths.append(f"./{PACKAGE_ALIAS}")
    conf = {"spark.archives": ",".join(archives)}
    for prefix in ("spark.emr-serverless.driverEnv.", "spark.executorEnv."):
        conf[prefix + "PYSPARK_PYTHON"] = interpreter
        conf[prefix + "PYTHONPATH"] = ":".join(paths)
    conf["spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON"] = interpreter
    return conf


def locked_pins(lock_text: str) -> dict[str, str]:
    """``{normalized name: version}`` of every pin in a pip-compile lock."""
    pins: dict[str, str] = {}
    for line in lock_text.splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s\\;]+)", line)
        if match:
            pins[normalize(match.group(1))] = match.group(3)
    return pins


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pip(args: list[str]) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise ArchiveError(f"pip {args[0]} failed ({result.returncode}):\n{tail}")


def build_archive(platform: str, root: Path = REPO_ROOT) -> Path:
    """Download (hash-checked, binary only) and install the lock for ``platform``
    into a fresh directory and pack it; returns the archive's path."""
    spec = target(platform)
    lock = root / LOCK
    out_dir = platform_dir(platform, root)
    wheels = out_dir / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    common = ["--require-hashes", "--only-binary=:all:", "-r", str(lock)]
    download = ["download", "--quiet", "-d", str(wheels), *spec.pip_target_args(), *common]
    try:  # offline first: the wheels of an earlier build, hash-checked against the lock
        _pip([*download, "--no-index", "--find-links", str(wheels)])
    except ArchiveError:
        _pip(download)
    with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
        site = Path(scratch) / "site"
        _pip(
            [
                "install",
                "--quiet",
                "--no-index",
                "--find-links",
                str(wheels),
                "--no-compile",
                "--no-warn-script-location",
                "--target",
                str(site),
                *spec.pip_target_args(),
                *common,
            ]
        )
        # Console scripts carry this machine's interpreter path: not for the service.
        shutil.rmtree(site / "bin", ignore_errors=True)
        archive = out_dir / ARCHIVE_FILE
        partial = archive.with_name(ARCHIVE_FILE + ".partial")
        partial.write_bytes(pack(site))
        partial.replace(archive)
    return archive


def pack(directory: Path) -> bytes:
    """``directory``'s contents as a tar.gz with fixed order, times and owners."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(directory.rglob("*")):
            if "__pycache__" in path.parts:
                continue
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(directory)))
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644
            if path.is_file():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


@dataclass(frozen=True)
class Distribution:
    name: str
    version: str
    tags: tuple[str, ...]


def archive_distributions(archive: Path) -> dict[str, Distribution]:
    """``{normalized name: Distribution}`` from the ``*.dist-info`` in an archive
    (``METADATA`` Name and Version, ``WHEEL`` Tag lines)."""
    found: dict[str, Distribution] = {}
    with tarfile.open(archive, "r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        for name, member in members.items():
            if not re.fullmatch(r"[^/]+\.dist-info/METADATA", name):
                continue
            meta = _read(tar, member)
            wheel_name = name.rsplit("/", 1)[0] + "/WHEEL"
            wheel = _read(tar, members[wheel_name]) if wheel_name in members else ""
            fields = dict(
                line.split(": ", 1) for line in meta.splitlines() if ": " in line and line[0] != " "
            )
            tags = tuple(line[5:].strip() for line in wheel.splitlines() if line.startswith("Tag:"))
            dist = Distribution(fields.get("Name", ""), fields.get("Version", ""), tags)
            found[normalize(dist.name)] = dist
    return found


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo) -> str:
    handle = tar.extractfile(member)
    return "" if handle is None else handle.read().decode("utf-8", errors="replace")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="artifacts.serverless_archive", description=__doc__)
    parser.add_argument("--platform", choices=("aarch64", "local"), action="append")
    args = parser.parse_args(argv)
    for platform in args.platform or ["aarch64", "local"]:
        try:
            path = build_archive(platform)
        except ArchiveError as exc:
            print(f"serverless archive for {platform}: {exc}", file=sys.stderr)
            return 1
        print(f"serverless archive for {platform}: {path} ({path.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
