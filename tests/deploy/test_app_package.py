"""app.zip holds only what runs on EMR: the ``app`` modules the job's entry point
imports, nothing else (no local harness, no tests, no caches, no locks).

The expectation is derived independently of :func:`artifacts.packaging.zip_package`:
it follows the import statements from ``job/main.py`` (module level and inside
functions), so a new module the job imports is expected without editing this
file, and a file nobody imports is caught. The negative checks prove the
comparison catches each kind of stray file.
"""

from __future__ import annotations

import ast
import io
import shutil
import zipfile
from pathlib import Path

import pytest

from artifacts.packaging import ENTRY_POINT, JOB_PACKAGES, zip_package

REPO = Path(__file__).resolve().parents[2]
PACKAGES = JOB_PACKAGES


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imported_names(path: Path, root: Path) -> set[str]:
    """Every module name an import statement in ``path`` may refer to (``from
    a.b import c`` may import module ``a.b.c`` or name ``c`` of ``a.b``)."""
    package = path.relative_to(root).parts[:-1]  # what a relative import starts from
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = list(package[: len(package) - node.level + 1]) if node.level else []
            base = ".".join([*parts, *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def job_module_files(root: Path = REPO) -> set[str]:
    """Zip entry names (``job/...``, ``model/...``) of the modules ``job/main.py`` imports,
    transitively, with the ``__init__.py`` of every package on the way."""
    entry = root / "job" / ENTRY_POINT
    seen: set[Path] = set()
    pending = [entry]
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imported_names(path, root):
            parts = name.split(".")
            if parts[0] not in PACKAGES:
                continue
            for end in range(1, len(parts) + 1):
                found = _module_file(root, ".".join(parts[:end]))
                if found is not None:
                    pending.append(found)
    seen.discard(entry)  # shipped beside the zip, run as a script
    return {str(path.relative_to(root)) for path in seen}


def differences(archive: bytes, expected: set[str]) -> dict[str, list[str]]:
    """What the zip has beyond ``expected``, and what it lacks."""
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        names = opened.namelist()
    duplicates = sorted({name for name in names if names.count(name) > 1})
    return {
        "unexpected": sorted(set(names) - expected),
        "missing": sorted(expected - set(names)),
        "duplicated": duplicates,
    }


CLEAN = {"unexpected": [], "missing": [], "duplicated": []}


def test_app_zip_holds_exactly_the_modules_the_job_imports() -> None:
    """The repository as it is (with whatever __pycache__ and locks it has)."""
    expected = job_module_files()
    # The derivation itself is sane: the job, its config and both sources, not
    # the entry scripts, and nothing outside the package.
    assert {"job/__init__.py", "job/driver.py", "model/config.py", "model/contract.py"} <= expected
    assert {"job/sources/aws_kinesis.py", "job/sources/kinesis_python.py"} <= expected
    assert {"job/main.py", "job/__main__.py"}.isdisjoint(expected)
    assert all(name.startswith(("job/", "model/")) and name.endswith(".py") for name in expected)
    assert differences(zip_package(REPO), expected) == CLEAN


def _copy_package(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    for package in PACKAGES:
        shutil.copytree(REPO / package, root / package)
    return root


def _with_entry(archive: bytes, name: str, content: bytes) -> bytes:
    buffer = io.BytesIO(archive)
    with zipfile.ZipFile(buffer, "a") as opened:
        opened.writestr(name, content)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("stray", "source"),
    [
        ("job/harness.py", "local/harness.py"),  # the local harness copied into the job
        ("job/sources/test_schema.py", "tests/deploy/test_app_package.py"),  # a tests file
    ],
)
def test_control_a_stray_module_in_the_package_is_caught(
    tmp_path: Path, stray: str, source: str
) -> None:
    root = _copy_package(tmp_path)
    (root / stray).write_bytes((REPO / source).read_bytes())
    found = differences(zip_package(root), job_module_files())
    assert found == {**CLEAN, "unexpected": [stray]}


def test_only_modules_are_zipped(tmp_path: Path) -> None:
    """Caches, locks and data files beside the modules never reach the zip."""
    root = _copy_package(tmp_path)
    extras = ("__pycache__/job.cpython-311.pyc", "requirements.lock", "fixtures/events.json")
    for extra in extras:
        (root / "job" / extra).parent.mkdir(parents=True, exist_ok=True)
        (root / "job" / extra).write_bytes(b"x")
    assert differences(zip_package(root), job_module_files()) == CLEAN


@pytest.mark.parametrize(
    "entry",
    [
        "job/__pycache__/driver.cpython-311.pyc",
        "local/harness.py",
        "tests/deploy/test_app_package.py",
        "job/requirements.lock",
        "job/__main__.py",
        "job/main.py",
    ],
)
def test_control_an_extra_zip_entry_is_caught(entry: str) -> None:
    """Whatever way a file gets into the zip (a changed builder), the check sees it."""
    archive = _with_entry(zip_package(REPO), entry, b"x")
    assert differences(archive, job_module_files())["unexpected"] == [entry]


def test_control_a_missing_module_is_caught(tmp_path: Path) -> None:
    root = _copy_package(tmp_path)
    (root / "model" / "lease.py").unlink()
    found = differences(zip_package(root), job_module_files())
    assert found["missing"] == ["model/lease.py"]


def test_control_the_derivation_follows_imports_inside_functions(tmp_path: Path) -> None:
    """A module the job imports lazily is expected; one nobody imports is not."""
    root = _copy_package(tmp_path)
    (root / "job" / "lazy_helper.py").write_text("VALUE = 1\n", encoding="utf-8")
    (root / "job" / "unused_helper.py").write_text("VALUE = 2\n", encoding="utf-8")
    job = root / "job" / "driver.py"
    job.write_text(
        job.read_text(encoding="utf-8")
        + "\n\ndef _lazy() -> int:\n    from job.lazy_helper import VALUE\n\n    return VALUE\n",
        encoding="utf-8",
    )
    expected = job_module_files(root)
    assert "job/lazy_helper.py" in expected
    assert "job/unused_helper.py" not in expected
    assert differences(zip_package(root), expected)["unexpected"] == ["job/unused_helper.py"]
