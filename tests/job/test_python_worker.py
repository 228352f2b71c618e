"""A Python worker keeps its archives' directories across tasks (job.python_worker)."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from job.python_worker import LAZY_SINCE, keep_archive_directories


def _archive(path: Path, module: str) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{module}.py", f"NAME = {module!r}\n")
    return path


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every archive directory read from now on; the patch undone afterwards."""
    monkeypatch.setattr(
        zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches
    )
    seen: list[str] = []
    original: Callable[[str], Any] = zipimport._read_directory  # type: ignore[attr-defined]

    def counting(archive: str) -> Any:
        seen.append(archive)
        return original(archive)

    monkeypatch.setattr(zipimport, "_read_directory", counting)
    return seen


def test_invalidate_caches_no_longer_rereads_archives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]
) -> None:
    first = _archive(tmp_path / "first.zip", "probe_first")
    monkeypatch.syspath_prepend(str(first))
    monkeypatch.delitem(sys.modules, "probe_first", raising=False)
    assert importlib.import_module("probe_first").NAME == "probe_first"
    if sys.version_info >= LAZY_SINCE:
        assert keep_archive_directories() is False
        return

    reads.clear()
    importlib.invalidate_caches()
    assert str(first) in reads, "Python 3.11 re-reads every archive on invalidate_caches"

    assert keep_archive_directories() is True
    assert keep_archive_directories() is False, "the second call changes nothing"
    reads.clear()
    importlib.invalidate_caches()
    assert reads == []

    # An archive that arrives later (a new path) is still read and importable.
    second = _archive(tmp_path / "second.zip", "probe_second")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.delitem(sys.modules, "probe_second", raising=False)
    importlib.invalidate_caches()
    assert importlib.import_module("probe_second").NAME == "probe_second"
    assert str(second) in reads
