"""artifacts/job_jar.py without javac: the jar is rebuilt only when its sources
or the Spark it compiles against change, its bytes depend on the classes
alone (fixed timestamps and order), a missing JDK or source is one clear
error, and a synth-only environment ships the jar ``make install`` built."""

from __future__ import annotations

import importlib.util
import zipfile
from io import BytesIO
from pathlib import Path

import pytest

from artifacts import job_jar
from model.jvm import local_jar


def _sources(root: Path, body: str = "class A {}") -> Path:
    source = root / job_jar.SOURCES / "streaming" / "A.java"
    source.parent.mkdir(parents=True)
    source.write_text(body, encoding="utf-8")
    return source


def test_the_digest_follows_the_sources(tmp_path: Path) -> None:
    source = _sources(tmp_path)
    before = job_jar.sources_digest(tmp_path)
    assert job_jar.sources_digest(tmp_path) == before
    source.write_text("class A { int x; }", encoding="utf-8")
    assert job_jar.sources_digest(tmp_path) != before


def test_no_source_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / job_jar.SOURCES).mkdir(parents=True)
    with pytest.raises(ValueError, match=r"no \.java file; expected the job's Java sources"):
        job_jar.source_files(tmp_path)


def test_an_up_to_date_jar_is_kept_without_a_jdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sources(tmp_path)
    monkeypatch.setattr(job_jar.shutil, "which", lambda _name: None)
    target = tmp_path / "out.jar"
    target.write_bytes(b"built before")
    target.with_name("out.jar.sources.sha256").write_text(job_jar.sources_digest(tmp_path))
    assert job_jar.build(tmp_path, target) == target
    assert target.read_bytes() == b"built before"
    target.with_name("out.jar.sources.sha256").write_text("older sources")
    with pytest.raises(RuntimeError, match="javac not found; the de-duplication jar needs a JDK"):
        job_jar.build(tmp_path, target)


def test_the_jar_bytes_depend_on_the_classes_only(tmp_path: Path) -> None:
    for name in ("b/B.class", "a/A.class"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(name.encode())
    first = job_jar._zip_classes(tmp_path)
    (tmp_path / "a/A.class").touch()  # a newer modification time
    assert job_jar._zip_classes(tmp_path) == first
    entries = zipfile.ZipFile(BytesIO(first)).infolist()
    assert [e.filename for e in entries] == ["META-INF/MANIFEST.MF", "a/A.class", "b/B.class"]
    assert {e.date_time for e in entries} == {(1980, 1, 1, 0, 0, 0)}


def test_without_spark_the_installed_jar_is_shipped_or_its_absence_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda _name: None)
    with pytest.raises(
        RuntimeError, match="missing; expected the job's jar, built by make install"
    ):
        job_jar.current(tmp_path)
    local_jar(tmp_path).parent.mkdir(parents=True)
    local_jar(tmp_path).write_bytes(b"jar")
    assert job_jar.current(tmp_path) == local_jar(tmp_path)
