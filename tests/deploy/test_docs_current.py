"""The first-day documents say what the code does: each
statement below is read from the code it describes, not restated here, so a
rename in the code fails the test until the document follows."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

import pytest

from artifacts import packaging
from infra.config import (
    InstanceConfigError,
    load_instances,
    read_cdk_context,
    runs_an_emr_cluster,
)
from infra.constructs import emr_cluster, job_deployment
from infra.emr_step import read_jar_lock
from infra.serverless import app as serverless_app
from infra.stacks.application import refuse_placeholders
from local import __main__ as local_run
from local.summary import RunFigures, summarize
from producer.events import FAILURE_KINDS
from scripts.preflight.checks import CHECKS
from tests.packages import PRODUCTION_PACKAGES

REPO = Path(__file__).resolve().parents[2]
DEPLOY = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
LOCAL = (REPO / "docs" / "local.md").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")
DESIGN = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
INFRA = (REPO / "docs" / "infra.md").read_text(encoding="utf-8")
EXAMPLE = {c.instance_id: c for c in load_instances(read_cdk_context(REPO / "cdk.json"))}


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
    assert "producer" in packages
    tests_section = _section(README, "## Tests and benchmarks")
    assert [p for p in packages if f"`{p}/`" not in tests_section] == []
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    installed = re.findall(r"apt-get install -y -qq (\S+);", makefile)
    assert installed == ["shellcheck", "openjdk-17-jdk-headless"]
    assert [tool for tool in installed if f"`{tool}`" not in README] == []
    assert "Node 22 or later" in README
    assert "Node 20" not in README


def test_the_placeholder_refusal_in_deploy_md_is_the_one_synth_prints() -> None:
    """Step 1 quotes the line synth prints for an instance on EMR (only an EMR
    cluster loads a TLS zip) of the example."""
    quoted = re.search(
        r"`instance (\S+): (field emr\.tls_certificates_s3_uri: still the example placeholder) …`",
        DEPLOY,
    )
    assert quoted is not None
    instance, message = quoted.groups()
    assert runs_an_emr_cluster(EXAMPLE[instance])
    with pytest.raises(InstanceConfigError) as refused:
        refuse_placeholders(list(EXAMPLE.values()))
    printed = str(refused.value).splitlines()
    assert any(line.startswith(f"instance {instance}: {message} ") for line in printed), printed


def test_the_verify_step_names_each_compute_by_its_outputs() -> None:
    verify = " ".join(DEPLOY[DEPLOY.index("5. **Verify.**") : DEPLOY.index("6. **Record")].split())
    emr_source = Path(emr_cluster.__file__).read_text(encoding="utf-8")
    assert 'stack_output(self, "EmrClusterId"' in emr_source
    emr = re.search(r"on EMR \(the example's `([^`]+)`\) outputs `EmrClusterId`", verify)
    assert emr is not None and runs_an_emr_cluster(EXAMPLE[emr[1]])
    serverless = re.search(
        rf"on EMR Serverless \(`([^`]+)`\) outputs `{serverless_app.APPLICATION_OUTPUT}` "
        rf"and `{serverless_app.JOB_RUN_OUTPUT}`",
        verify,
    )
    assert serverless is not None and not runs_an_emr_cluster(EXAMPLE[serverless[1]])


def test_design_md_names_the_jackson_version_the_jar_lock_pins() -> None:
    (databind,) = [
        j
        for j in read_jar_lock(REPO / "bootstrap" / "jars.lock")
        if j.artifact == "jackson-databind"
    ]
    pyspark = importlib.metadata.version("pyspark")
    row = next(line for line in DESIGN.splitlines() if "**Jackson mismatch at runtime**" in line)
    assert (
        f"the Spark runtime's version ({databind.version}, what the pyspark {pyspark} wheel" in row
    )
    assert set(re.findall(r"\b2\.\d+\.\d+\b", row)) == {databind.version}


def test_infra_md_declares_an_instance_as_the_example_does() -> None:
    """The declaration sample loads as synth loads it, and its ``defaults`` is
    the shipped one."""
    sample = re.search(r"```json\n(\"streaming\": \{.*?\n\})\n```", INFRA, re.DOTALL)
    assert sample is not None
    context = json.loads("{" + sample[1] + "}")
    loaded = load_instances(context)
    assert [c.instance_id for c in loaded] == ["orders-ap-northeast-2", "payments-ap-northeast-2"]
    shipped = read_cdk_context(REPO / "cdk.json")["streaming"]["defaults"]
    assert context["streaming"]["defaults"] == shipped == {}
    assert "the shipped `defaults` block is empty, `{}`" in " ".join(INFRA.split())


def _label(line: str) -> str:
    """A summary line's label: its leading words (``records produced``,
    ``job exit code``, ``target emr``, ``wall time``)."""
    found = re.match(r"[A-Za-z]+(?: [A-Za-z]+)*", line.strip())
    assert found is not None, line
    return found[0]


def _doc_summaries() -> list[list[str]]:
    blocks = re.findall(r"```(?:text)?\n(instance [a-z]+-.*?)```", LOCAL, re.DOTALL)
    return [block.strip("\n").splitlines() for block in blocks]


def _printed_summary(instance_id: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What ``make run`` prints at its end for one instance, from a run of
    three records (the labels and their order do not depend on the figures)."""
    instance = EXAMPLE[instance_id]
    kind = FAILURE_KINDS[0]
    figures = RunFigures(
        instance=instance_id,
        produced_records=3,
        produced_by_kind={"valid": 2, kind: 1},
        expected_ids=frozenset({"a", "b"}),
        expected_failures={"k": kind},
        table_ids=["a", "b"],
        topic_reasons_by_key={"k": [kind]},
        topic_records=1,
        source="python-kinesis, polling (GetRecords)",
    )
    targets = {instance_id: local_run.describe_target(instance)}
    page = ".work/run/report/index.html"
    local_run._report([summarize(figures)], {instance_id: 0}, page, 1.0, targets)
    return [line for line in capsys.readouterr().out.splitlines() if line.strip("=")]


def test_local_md_samples_print_what_the_summary_printer_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each sample summary of docs/local.md has the lines ``make run`` prints
    for its instance, in their order, and a failure reason for every kind the
    run produces."""
    samples = _doc_summaries()
    assert len(samples) == 2
    for sample in samples:
        instance_id = sample[0].removeprefix("instance ")
        printed = _printed_summary(instance_id, capsys)
        assert [_label(line) for line in sample] == [_label(line) for line in printed]
        (failures,) = [line for line in sample if line.strip().startswith("failure records")]
        reasons = re.findall(r"(\w+)=\d+", failures.split("by reason:")[1])
        assert reasons == sorted(FAILURE_KINDS)


def test_local_md_states_the_local_run_s_settings() -> None:
    table = _section(LOCAL, "Local adaptations")
    defaults = local_run.parse_args([])
    rows = {
        "trigger_interval_sec": f"{defaults.trigger_interval_sec} (`--trigger-interval-sec`)",
        "source.max_fetch_records_per_shard": (
            f"{defaults.max_fetch_records_per_shard} (`--max-fetch-records-per-shard`)"
        ),
        "max_record_bytes": f"{local_run.LOCAL_MAX_RECORD_BYTES:,}",
    }
    assert [f for f, value in rows.items() if f"| `{f}` | {value} |" not in table] == []


# A repository path in a document or in production code's comments and
# docstrings: the top-level folders of this repository, then a file name.
_REPO_PATH = re.compile(
    r"(?<![\w/.-])(?:artifacts|bench|bootstrap|docs|emr|infra|integ|job|jvm|local|model|"
    r"producer|scripts|tests)/[\w/.-]+\.(?:py|sh|json|md|java)\b"
)
# Named on purpose although no file has it: the job-run handler's path inside
# its Lambda asset (artifacts/packaging.py stages it there, so the deployed
# ``Handler`` string never changes).
_NOT_FILES = frozenset({"infra/serverless_job_run_handler.py"})


def _texts() -> list[Path]:
    production = [path for folder in PRODUCTION_PACKAGES for path in (REPO / folder).rglob("*.py")]
    return [*production, *(REPO / "docs").glob("*.md"), REPO / "README.md", REPO / "app.py"]


def test_every_repository_path_the_docs_and_the_code_name_exists() -> None:
    """A moved module or test leaves no pointer behind: each path named in
    docs/, the README or a production module's text is a file of this tree."""
    named = {
        (path.relative_to(REPO).as_posix(), found)
        for path in _texts()
        for found in _REPO_PATH.findall(path.read_text(encoding="utf-8"))
    }
    assert len(named) > 100, "the scan found too few paths to be reading the tree"
    missing = sorted(
        f"{where}: {found}"
        for where, found in named
        if found not in _NOT_FILES and not (REPO / found).exists()
    )
    assert not missing, "\n".join(missing)
