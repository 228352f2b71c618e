"""The first-day documents say what the code does: each
statement below is read from the code it describes, not restated here, so a
rename in the code fails the test until the document follows."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from infra import packaging
from infra.constructs import job_deployment
from scripts.preflight.checks import CHECKS

REPO = Path(__file__).resolve().parents[2]
DEPLOY = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
LOCAL = (REPO / "docs" / "local.md").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = text.find("\n## ", start + len(heading))
    return text[start : following if following != -1 else len(text)]


def _check_names() -> set[str]:
    """The names the preflight checks report, read from their modules'
    ``name = "..."`` / ``NAME = "..."`` / ``name="..."`` literals."""
    names: set[str] = set()
    modules = {check.__module__ for check in CHECKS}
    assert len(modules) >= 10, modules
    for module in modules:
        source = (REPO / (module.replace(".", "/") + ".py")).read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if {"name", "NAME"} & set(targets) and isinstance(node.value.value, str):
                    names.add(node.value.value)
            if (
                isinstance(node, ast.keyword)
                and node.arg == "name"
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                names.add(node.value.value)
    return names


def test_the_first_deploy_checklist_names_every_preflight_check() -> None:
    checklist = " ".join(_section(DEPLOY, "## First deploy: the checklist").split())
    names = _check_names()
    assert {"failure record size", "Kinesis shard bound", "TLS certificate zip"} <= names
    missing = sorted(name for name in names if f"**{name}**" not in checklist)
    assert missing == []


def test_the_step_name_in_deploy_md_is_the_one_the_stack_gives() -> None:
    source = Path(job_deployment.__file__).read_text(encoding="utf-8")
    assert 'step_name=f"streaming-{props.instance_id}-{self.package_version}"' in source
    assert "`streaming-<instance>-<hash>`" in DEPLOY
    assert not re.search(r"the step `streaming-<instance>`", DEPLOY)


def test_the_artifacts_in_brief_list_every_file_of_the_job_package() -> None:
    brief = _section(DEPLOY, "## In brief: artifact, bootstrap, jars, redeploy")
    staged = [packaging.PACKAGE_ZIP, packaging.ENTRY_POINT, packaging.JOB_JAR]
    staged.append(packaging.JOB_CONFIG_FILE)
    assert "streaming-job.jar" in staged
    assert [name for name in staged if f"`{name}`" not in brief] == []


def test_local_md_names_the_catalog_the_run_writes() -> None:
    table = (REPO / "local" / "table.py").read_text(encoding="utf-8")
    assert "'catalog.db'" in table
    assert "`catalog.db`" in LOCAL
    assert "`metastore_db/`" not in LOCAL


def test_the_readme_names_every_mypy_package_and_what_make_install_installs() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    packages = pyproject["tool"]["mypy"]["files"]
    assert "ops" in packages
    tests_section = _section(README, "## Tests and benchmarks")
    assert [p for p in packages if f"`{p}/`" not in tests_section] == []
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    installed = re.findall(r"apt-get install -y -qq (\S+);", makefile)
    assert installed == ["shellcheck", "openjdk-17-jdk-headless"]
    assert [tool for tool in installed if f"`{tool}`" not in README] == []
    assert "Node 22 or later" in README
    assert "Node 20" not in README
