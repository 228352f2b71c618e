"""The dependency direction, enforced over the source (docs/design.md, "Architecture").

contract <- the shared model (``model``: no Spark, no pyiceberg, no pyarrow)
<- the job (``job``: the PySpark code that ships to EMR). ``infra`` and
``producer`` import the model and never the job; ``infra`` builds on the build
tools (``artifacts``: the jar, the serverless archive, the staged packages),
which import the model and the EMR release facts (``emr``, pure data that
imports nothing of the project) and never ``infra``; no module of ``infra``
imports pyspark, not even inside a function (the jar's build, which does, is
in ``artifacts``), so synth runs without the Spark wheel; the operator commands
(``scripts``) import the job only to read the table (:mod:`job.table.catalog`,
pyiceberg); the local harness (``local``) and the benchmarks (``bench``) run
Spark and may import both. The job is what ships to EMR: if it imported the
harness or the CDK app, the cluster would need them (and the artifact would
carry them). The operator commands run against a real account: they share
``producer`` with the harness but never import the harness itself, nor does the
harness import them. Every import in the tree, including the ones inside
functions and ``TYPE_CHECKING`` blocks, is checked here by walking the AST, not
by importing anything; :func:`test_the_model_imports_no_spark` holds the model
to its name.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.packages import PRODUCTION_PACKAGES

ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = frozenset({*PRODUCTION_PACKAGES, "tests"})

# What each layer may import from the project (besides itself). The contract
# is the bottom: plain names and schema, no project imports at all.
CONTRACT = "model.contract"
ALLOWED: dict[str, frozenset[str]] = {
    CONTRACT: frozenset(),
    "model": frozenset({"model"}),
    "emr": frozenset({"emr"}),
    "job": frozenset({"model", "job"}),
    "artifacts": frozenset({"model", "emr", "artifacts"}),
    "infra": frozenset({"model", "emr", "artifacts", "infra"}),
    "producer": frozenset({"model", "emr", "artifacts", "infra", "producer"}),
    "local": frozenset({"model", "emr", "job", "artifacts", "infra", "producer", "local"}),
    "scripts": frozenset({"model", "emr", "job", "artifacts", "infra", "producer", "scripts"}),
    "bench": frozenset({"model", "emr", "job", "artifacts", "infra", "producer", "local", "bench"}),
    "integ": frozenset({"model", "emr", "artifacts", "infra", "producer", "integ"}),
}
# The model's modules import none of these, anywhere (inside functions too):
# infra, producer and the operator commands import the model where the Spark wheel
# (about 400 MB), pyiceberg and pyarrow need not be installed.
HEAVY = frozenset({"pyspark", "py4j", "pyiceberg", "pyarrow"})


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    module: str
    imported: str
    allowed: frozenset[str]

    def __str__(self) -> str:
        allowed = ", ".join(sorted(self.allowed)) or "nothing from the project"
        return (
            f"{self.path}:{self.line}: {self.module} imports {self.imported}; "
            f"this layer may import {allowed}"
        )


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every ``import``/``from`` target with its line; relative imports resolved."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # ``from model import contract`` imports the module model.contract.
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
    return found


def layer_of(module: str) -> str | None:
    if module == CONTRACT or module.startswith(CONTRACT + "."):
        return CONTRACT
    top = module.split(".", 1)[0]
    return top if top in ALLOWED else None


def violations(root: Path) -> list[Violation]:
    found: list[Violation] = []
    for top in sorted(ALLOWED.keys() - {CONTRACT}):
        for path in sorted((root / top).rglob("*.py")):
            module = module_name(root, path)
            layer = layer_of(module)
            if layer is None:
                continue
            allowed = ALLOWED[layer]
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for line, target in imported_modules(tree, module, path.name == "__init__.py"):
                target_top = target.split(".", 1)[0]
                if target_top not in PROJECT_PACKAGES:
                    continue
                target_layer = layer_of(target) or target_top
                # A layer may always import the contract unless it is the contract.
                if target_layer == CONTRACT and layer != CONTRACT:
                    continue
                if target_top in allowed and target_layer != "tests":
                    continue
                rel = str(path.relative_to(root))
                found.append(Violation(rel, line, module, target, allowed))
    return found


def test_the_source_tree_follows_the_dependency_direction() -> None:
    found = violations(ROOT)
    assert not found, "\n".join(str(v) for v in found)


def heavy_imports(root: Path, package: str = "model") -> list[str]:
    """``path:line: module`` for every import of :data:`HEAVY` in ``package``."""
    found: list[str] = []
    for path in sorted((root / package).rglob("*.py")):
        module = module_name(root, path)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, target in imported_modules(tree, module, path.name == "__init__.py"):
            if target.split(".", 1)[0] in HEAVY:
                found.append(f"{path.relative_to(root)}:{line}: {target}")
    return found


def test_the_model_imports_no_spark() -> None:
    found = heavy_imports(ROOT)
    assert not found, "\n".join(found)


# The CDK app runs where the Spark wheel is not installed (make synth-light):
# none of its modules imports pyspark (or the other heavy packages), not even
# inside a function. What needs Spark to build lives in ``artifacts``.
def test_the_cdk_app_imports_no_spark() -> None:
    found = heavy_imports(ROOT, "infra")
    assert not found, "\n".join(found)
    assert pyspark_import_mentions(ROOT) == []


_PYSPARK_IMPORT = "import " + "pyspark"


def pyspark_import_mentions(root: Path, package: str = "infra") -> list[str]:
    """``path:line`` of every line of ``package`` that says ``import pyspark``
    as text: also in a snippet a module would hand to a child interpreter."""
    return [
        f"{path.relative_to(root)}:{number}"
        for path in sorted((root / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _PYSPARK_IMPORT in line
    ]


def test_a_pyspark_import_in_the_cdk_app_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "infra/a.py", "def f():\n    import pyspark  # optional: x\n")
    _write(tmp_path, "infra/b.py", 'SNIPPET = "from x import y; import pyspark"\n')
    _write(tmp_path, "artifacts/job_jar.py", "def f():\n    import pyspark  # optional: x\n")
    assert heavy_imports(tmp_path, "infra") == ["infra/a.py:2: pyspark"]
    assert pyspark_import_mentions(tmp_path) == ["infra/a.py:2", "infra/b.py:1"]


def test_a_heavy_import_in_the_model_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "model/config.py", "def f():\n    from pyiceberg import catalog\n")
    _write(tmp_path, "job/transform.py", "import pyspark\n")
    assert heavy_imports(tmp_path) == ["model/config.py:2: pyiceberg.catalog"]


def test_the_check_reads_the_real_tree() -> None:
    """Guards against a check that passes because it read nothing."""
    job_modules = [module_name(ROOT, p) for p in (ROOT / "job").rglob("*.py")]
    assert "job.driver" in job_modules
    model_modules = [module_name(ROOT, p) for p in (ROOT / "model").rglob("*.py")]
    assert "model.contract" in model_modules
    assert "producer.producer" in [module_name(ROOT, p) for p in (ROOT / "producer").rglob("*.py")]
    tree = ast.parse((ROOT / "infra" / "config.py").read_text(encoding="utf-8"))
    assert any(t.startswith("model.") for _, t in imported_modules(tree, "infra.config", False))


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("relative", "text", "imported"),
    [
        (
            "job/driver.py",
            "from infra.config import InstanceConfig\n",
            "infra.config.InstanceConfig",
        ),
        ("job/driver.py", "def f():\n    import local.harness\n", "local.harness"),
        (
            "job/sinks/kafka.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from local import x\n",
            "local.x",
        ),
        ("model/contract.py", "from model import config\n", "model.config"),
        ("model/config.py", "from job import transform\n", "job.transform"),
        ("infra/stack.py", "from job.sources import read_stream\n", "job.sources.read_stream"),
        ("producer/events.py", "from job.transform import classify\n", "job.transform.classify"),
        ("model/contract.py", "from . import config\n", "model.config"),
        ("infra/stack.py", "from local.emulators import Endpoints\n", "local.emulators.Endpoints"),
        ("local/run.py", "from tests.job import helpers\n", "tests.job.helpers"),
        ("scripts/status.py", "from local.emulators import LOOPBACK\n", "local.emulators.LOOPBACK"),
        ("scripts/produce.py", "def f():\n    import local.producer\n", "local.producer"),
        ("local/harness.py", "from scripts.status import main\n", "scripts.status.main"),
        (
            "producer/producer.py",
            "from local.emulators import Endpoints\n",
            "local.emulators.Endpoints",
        ),
        ("producer/events.py", "from scripts import status\n", "scripts.status"),
        ("bench/b.py", "from scripts.reprocess import main\n", "scripts.reprocess.main"),
        ("artifacts/packaging.py", "from infra.emr_step import X\n", "infra.emr_step.X"),
        ("emr/releases.py", "from model import config\n", "model.config"),
        ("model/config.py", "from emr.releases import release_for\n", "emr.releases.release_for"),
        ("job/driver.py", "from artifacts import job_jar\n", "artifacts.job_jar"),
    ],
)
def test_a_wrong_direction_import_is_reported(
    tmp_path: Path, relative: str, text: str, imported: str
) -> None:
    _write(tmp_path, "model/__init__.py", "")
    _write(tmp_path, "job/sinks/__init__.py", "")
    _write(tmp_path, relative, text)
    found = violations(tmp_path)
    assert [(v.path, v.imported) for v in found] == [(relative, imported)]
    assert relative in str(found[0]) and "may import" in str(found[0])


def test_allowed_directions_are_not_reported(tmp_path: Path) -> None:
    _write(tmp_path, "model/__init__.py", "")
    _write(tmp_path, "model/contract.py", "import json\n")
    _write(tmp_path, "model/config.py", "from model import contract\n")
    _write(tmp_path, "job/driver.py", "from model import contract\nfrom job.sinks import kafka\n")
    _write(tmp_path, "infra/stack.py", "from model.config import JobConfig\nimport infra.sizing\n")
    _write(tmp_path, "local/run.py", "from infra.config import load_instances\nimport job.driver\n")
    _write(tmp_path, "bench/b.py", "from local.emulators import Endpoints\n")
    _write(
        tmp_path,
        "producer/producer.py",
        "from model import aws_clients\nfrom producer import events\n",
    )
    _write(tmp_path, "scripts/status.py", "def f():\n    from job.table import catalog\n")
    _write(tmp_path, "local/harness.py", "from producer.producer import put_all\n")
    _write(tmp_path, "scripts/produce.py", "from producer.producer import put_all\n")
    _write(tmp_path, "bench/c.py", "from producer.events import generate\n")
    _write(tmp_path, "infra/d.py", "from artifacts.packaging import stage_files\n")
    _write(tmp_path, "artifacts/e.py", "from emr.releases import release_for\nimport model.jvm\n")
    assert violations(tmp_path) == []


# A reference to a document outside the repository: the team's shared design
# file, which a user who clones the project does not have.
# Spelled in parts so that this file itself names no such path.
_SHARED_NAME = "DESIGN" + ".md"
_SHARED_DIR = ".." + "/shared"
OUTSIDE_REFERENCE = re.compile(rf"(?<![\w/]){re.escape(_SHARED_NAME)}|{re.escape(_SHARED_DIR)}\b")


def outside_references(root: Path, paths: list[str]) -> list[str]:
    found: list[str] = []
    for relative in paths:
        path = root / relative
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if OUTSIDE_REFERENCE.search(line):
                found.append(f"{relative}:{number}: {line.strip()}")
    return found


# What a checkout holds besides its own files: installs, builds, run outputs
# (.gitignore's list). A source archive has none of them, and no .git either.
NOT_THE_PROJECTS = frozenset(
    {
        ".git",
        ".venv",
        ".venv-synth",
        "node_modules",
        "build",
        "cdk.out",
        "cdk.out.light",
        ".work",
        "metastore_db",
        "spark-warehouse",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
    }
)


def project_files(root: Path) -> list[str]:
    """The project's files under ``root``, relative, without what installs and
    runs leave behind: the same list in a clone and in an unpacked archive."""
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in NOT_THE_PROJECTS)
        base = Path(folder).relative_to(root)
        found += [
            str(base / name) for name in sorted(files) if not (Path(folder) / name).is_symlink()
        ]
    return found


def test_project_files_skip_installs_and_outputs(tmp_path: Path) -> None:
    _write(tmp_path, "docs/a.md", "a\n")
    _write(tmp_path, ".venv/lib/b.py", "b\n")
    _write(tmp_path, "sub/__pycache__/c.pyc", "c\n")
    assert project_files(tmp_path) == ["docs/a.md"]


def test_no_file_points_outside_the_repository() -> None:
    tracked = project_files(ROOT)
    assert "docs/design.md" in tracked
    found = outside_references(ROOT, tracked)
    assert not found, "\n".join(found)


def test_an_outside_reference_is_found(tmp_path: Path) -> None:
    _write(tmp_path, "a.py", f'"""See {_SHARED_NAME} §1."""\n')
    _write(tmp_path, "b.md", f"Kept in `{_SHARED_DIR}/{_SHARED_NAME}`.\n")
    _write(tmp_path, "c.md", "See [design](docs/design.md).\n")
    assert [f.split(":")[0] for f in outside_references(tmp_path, ["a.py", "b.md", "c.md"])] == [
        "a.py",
        "b.md",
    ]


# An import inside a function stays there only where a cycle or an optional
# dependency forces it, and says which on its line, so a reader sees why it
# is not at the top.
_REASON = re.compile(r"#\s*(optional|cycle)\b")


def unexplained_function_imports(root: Path) -> list[str]:
    """``path:line`` of every import inside a function without its reason."""
    found: list[str] = []
    for top in PRODUCTION_PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").splitlines()
            tree = ast.parse("\n".join(lines), filename=str(path))
            nested = {
                node.lineno
                for function in ast.walk(tree)
                if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
                for node in ast.walk(function)
                if isinstance(node, (ast.Import, ast.ImportFrom))
            }
            found.extend(
                f"{path.relative_to(root)}:{line}"
                for line in sorted(nested)
                if not _REASON.search(lines[line - 1])
            )
    return found


def test_an_import_inside_a_function_says_why() -> None:
    found = unexplained_function_imports(ROOT)
    assert not found, "\n".join(found)


def test_an_unexplained_function_import_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "job/a.py",
        "def f():\n    import json\n\n\ndef g():\n    import pyspark  # optional: x\n",
    )
    _write(tmp_path, "infra/b.py", "import json\n\n\ndef h():\n    from x import y  # cycle: z\n")
    assert unexplained_function_imports(tmp_path) == ["job/a.py:2"]


# Code, comments, docstrings and test names say what and why, never which
# ticket asked for it: a ticket's number means nothing to a reader of the code,
# and the ticket tracker is not shipped with it. Spelled in parts so that this
# file itself holds no such reference.
_TICKET = "issue"
# White space, a line break included: a wrapped paragraph can split the two.
TICKET_REFERENCE = re.compile(rf"\b{_TICKET}s?\s+#?[0-9]+", re.IGNORECASE)
TICKET_SCANNED = (
    *PRODUCTION_PACKAGES,
    "tests",
    "app.py",
    "Makefile",
    "requirements-dev.txt",
    "requirements-synth.txt",
    "README.md",
    "docs",
)


def ticket_references(root: Path) -> list[str]:
    """``path:line: text`` of every ticket number in the sources, build files and docs."""
    found: list[str] = []
    for top in TICKET_SCANNED:
        base = root / top
        pattern = "*.md" if top == "docs" else "*.py"
        paths = [base] if base.is_file() else sorted(base.rglob(pattern))
        for path in paths:
            relative = path.relative_to(root)
            text = path.read_text(encoding="utf-8")
            for match in TICKET_REFERENCE.finditer(text):
                number = text.count("\n", 0, match.start()) + 1
                found.append(f"{relative}:{number}: {' '.join(match.group().split())}")
    return found


def test_no_source_names_a_ticket() -> None:
    found = ticket_references(ROOT)
    assert not found, "\n".join(found)


def test_a_ticket_reference_is_found(tmp_path: Path) -> None:
    _write(tmp_path, "job/a.py", f'"""Kept with the row ({_TICKET.title()} 34)."""\n')
    _write(tmp_path, "tests/job/test_a.py", f"def test_x():  # {_TICKET}s #12 and 13\n")
    _write(tmp_path, "app.py", f"# {_TICKET} tracker: none here\n")
    _write(tmp_path, "docs/a.md", f"Priced under {_TICKET} 40's target.\n")
    # A wrapped paragraph splits the word and the number over two lines.
    _write(tmp_path, "docs/b.md", f"Priced under the\n{_TICKET}\n40's target.\n")
    _write(
        tmp_path,
        "infra/b.py",
        f"# https://github.com/aws-samples/emr-serverless-samples/{_TICKET}s/16\n",
    )
    assert [f.split(":")[0] for f in ticket_references(tmp_path)] == [
        "job/a.py",
        "tests/job/test_a.py",
        "docs/a.md",
        "docs/b.md",
    ]


# A test's import inside a function: ruff (PLC0415) refuses it unless the line
# carries ruff's noqa for it; this holds each such line to a reason after the
# code and the tests to a few, so that what a test needs is read at its top.
# Spelled in parts so that this file's own lines are not counted.
LOCAL_TEST_IMPORTS_ALLOWED = 10
_NOQA_LOCAL = "# noqa: " + "PLC0415"
_LOCAL_IMPORT = re.compile(r"#\s*noqa:\s*PLC0415\b(.*)$")


def local_test_imports(root: Path) -> tuple[int, list[str]]:
    """How many function-level imports the tests keep, and ``path:line`` of
    each without its reason."""
    count, bare = 0, []
    for path in sorted((root / "tests").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = _LOCAL_IMPORT.search(line)
            if found:
                count += 1
                if len(found.group(1).strip(" :,;-")) < 3:
                    bare.append(f"{path.relative_to(root)}:{number}")
    return count, bare


def test_a_test_keeps_an_import_local_only_with_its_reason() -> None:
    count, bare = local_test_imports(ROOT)
    assert not bare, "\n".join(bare)
    assert count <= LOCAL_TEST_IMPORTS_ALLOWED


def test_a_local_test_import_without_its_reason_is_reported(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "tests/test_a.py",
        f"def f():\n    import json  {_NOQA_LOCAL}\n\n\n"
        f"def g():\n    import x  {_NOQA_LOCAL} patched by the fixture first\n",
    )
    assert local_test_imports(tmp_path) == (2, ["tests/test_a.py:2"])
