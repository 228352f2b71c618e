"""Builds the job's JVM jar (``jvm/src``) offline.

The jar holds the de-duplication's ``StatefulProcessor`` and the
undeclared-key functions (:mod:`model.jvm` says why each is JVM code). It is
built here, never downloaded:
``javac`` (Java 17, on every machine this project runs on) compiles the sources
against the jars of the pinned pyspark wheel, which hold every Spark class the
jar uses, and the classes are zipped with fixed timestamps and order, so
the same sources and the same JDK give the same bytes and an unchanged job is
not a new version (:func:`artifacts.packaging.stage_package` ships it).

``make install`` runs ``python -m artifacts.job_jar``; the local run, the tests
and the benchmarks load the result through :func:`model.spark_conf.local_conf`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Final

from model.jvm import JAR_NAME, local_jar

ROOT: Final = Path(__file__).resolve().parents[1]
SOURCES: Final = "jvm/src"
# The oldest Java the EMR 8.x runtime runs Spark 4 on: the bytecode level.
JAVA_RELEASE: Final = "17"
_ZIP_EPOCH: Final = (1980, 1, 1, 0, 0, 0)
_STAMP: Final = ".sources.sha256"


def spark_jars_dir() -> Path:
    """The pinned pyspark wheel's ``jars/``: the compile classpath."""
    import pyspark  # optional: synth-only environments have no Spark wheel (current())

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    if not jars.is_dir():
        raise RuntimeError(f"{jars}: missing; expected the pyspark wheel's jars (make install)")
    return jars


def source_files(root: Path = ROOT) -> list[Path]:
    files = sorted((root / SOURCES).rglob("*.java"))
    if not files:
        raise ValueError(f"{root / SOURCES}: no .java file; expected the job's Java sources")
    return files


def sources_digest(root: Path = ROOT) -> str:
    """Over the sources and the Spark the jar is compiled against."""
    import pyspark  # optional: synth-only environments have no Spark wheel (current())

    sha = hashlib.sha256(f"spark {pyspark.__version__} release {JAVA_RELEASE}\0".encode())
    for path in source_files(root):
        sha.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()


def current(root: Path = ROOT) -> Path:
    """The jar a synth ships. Where the Spark wheel is installed, rebuilt if its
    sources changed; in a synth-only environment (no pyspark, CI's own step),
    the jar ``make install`` built, as it is: synth needs no Spark."""
    if importlib.util.find_spec("pyspark") is not None:
        return build(root)
    target = local_jar(root)
    if not target.is_file():
        raise RuntimeError(
            f"{target}: missing; expected the job's jar, built by make install "
            "(javac against the pyspark wheel's jars)"
        )
    return target


def build(root: Path = ROOT, out: Path | None = None) -> Path:
    """Compile and zip unless ``out`` already holds the jar of these sources."""
    target = out or local_jar(root)
    stamp = target.with_name(target.name + _STAMP)
    digest = sources_digest(root)
    if target.is_file() and stamp.is_file() and stamp.read_text() == digest:
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise RuntimeError(
            "javac not found; the de-duplication jar needs a JDK 17 "
            "(apt-get install openjdk-17-jdk-headless)"
        )
    with tempfile.TemporaryDirectory() as classes:
        command = [
            javac, "--release", JAVA_RELEASE, "-nowarn", "-encoding", "UTF-8",
            "-cp", f"{spark_jars_dir()}/*", "-d", classes,
            *(str(path) for path in source_files(root)),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed ({done.returncode}):\n{done.stderr}")
        content = _zip_classes(Path(classes))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    stamp.write_text(digest)
    return target


def _zip_classes(classes: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        manifest = zipfile.ZipInfo("META-INF/MANIFEST.MF", _ZIP_EPOCH)
        archive.writestr(manifest, "Manifest-Version: 1.0\r\n\r\n")
        for path in sorted(classes.rglob("*.class")):
            info = zipfile.ZipInfo(str(path.relative_to(classes)), _ZIP_EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def main() -> None:
    print(f"{JAR_NAME}: {build()}")


if __name__ == "__main__":
    main()
