"""Tests mirror the code: ``tests/<package path>/test_<module>.py`` for every
module of the project's packages, so a newcomer finds a module's test where the
module's path says.

A module tested elsewhere is named in :data:`COVERED_ELSEWHERE` with the test
file that covers it, and, where that file reaches it through another module
(a stack through its constructs, ``python -m bench`` through a benchmark's
name), that module. The check holds each claim to the files, read with
:mod:`ast` rather than searched as text, so that a claim cannot be met by the
name merely appearing (in a comment, or in this file's own list): the named
test file imports the module, or imports the ``via`` module whose source
imports it. A test reaches a module it runs in a child process too: the
imports of a ``python -c`` snippet it holds count, ``python -m <name>`` counts
as importing ``<name>`` and ``<name>.__main__`` (reached through a
``__main__``, the module's name, as ``python -m bench growth`` is given it,
must be among the test's strings), and the ``tests.*`` helpers it imports
count with it. A claim naming this file is
refused: it would cover a module by listing it. A module with neither a mirror
nor an honest claim fails here, naming the test file it lacks. The list is what
is left to mirror: a new module gets its own test file.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import pytest

from tests.packages import PRODUCTION_PACKAGES

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = PRODUCTION_PACKAGES
# Entry points with no logic of their own: ``python -m <package>`` shims.
ENTRY_FILES = frozenset({"__init__.py", "__main__.py"})

# A benchmark is run by its name through ``python -m bench``.
MAIN = "bench.__main__"
# module -> (the test file that covers it, the module it is reached through or "").
COVERED_ELSEWHERE: dict[str, tuple[str, str]] = {
    "model.contract": ("tests/model/test_exit_record.py", ""),
    "job.java_classes": ("tests/model/test_jvm.py", ""),
    "job.session": ("tests/model/test_spark_conf.py", ""),
    "infra.constructs.alarms": ("tests/infra/constructs/test_tuning.py", ""),
    "infra.constructs.buckets": ("tests/infra/constructs/test_tuning.py", ""),
    "infra.constructs.catalog": ("tests/infra/constructs/test_events_table.py", ""),
    "infra.constructs.emr_cluster": ("tests/infra/stacks/test_serverless_stack.py", ""),
    "infra.constructs.job_deployment": ("tests/deploy/test_docs_current.py", ""),
    "infra.serverless.app": ("tests/infra/supervisor/test_serverless.py", ""),
    "infra.emr_step": ("tests/infra/serverless/test_job_run.py", ""),
    "artifacts.packaging": ("tests/infra/supervisor/test_serverless.py", ""),
    "infra.cost.prices": ("tests/infra/cost/test_estimate.py", ""),
    "emr.releases": ("tests/infra/test_config.py", ""),
    "infra.s3_keys": ("tests/infra/supervisor/test_handler.py", ""),
    "infra.stacks.application": ("tests/infra/stacks/test_instance_schema.py", ""),
    "infra.stacks.streaming_stack": (
        "tests/infra/stacks/test_first_deploy.py",
        "infra.stacks.application",
    ),
    "producer.aggregation": ("tests/job/sources/test_kinesis_rows.py", ""),
    "producer.arguments": ("tests/scripts/test_arguments.py", "producer.producer"),
    "producer.events": ("tests/producer/test_stream_writer.py", ""),
    "producer.local_run": ("tests/scripts/test_produce.py", ""),
    "integ.app": ("tests/integ/test_check.py", ""),
    "local.harness": ("tests/local/test_efo_endpoint.py", ""),
    "local.maintain": ("tests/job/table/test_commit.py", ""),
    "local.metrics_dump": ("tests/local/test_metrics_dump_offsets.py", ""),
    "local.report_cli": ("tests/local/test_report.py", ""),
    "local.spark_stages": ("tests/job/test_micro_batch.py", ""),
    "local.table": ("tests/e2e/test_crash_loop.py", ""),
    "scripts.command": ("tests/scripts/test_start.py", ""),
    "scripts.preflight.checks": ("tests/scripts/preflight/test_serverless.py", ""),
    "scripts.preflight.result": ("tests/scripts/preflight/test_tls.py", ""),
    "scripts.redeploy": ("tests/scripts/test_arguments.py", ""),
    "scripts.reprocess.hook": ("tests/scripts/reprocess/test_run.py", ""),
    "bench.dedup": ("tests/bench/test_bench_smoke.py", MAIN),
    "bench.efo": ("tests/bench/test_bench_efo.py", MAIN),
    "bench.growth": ("tests/bench/test_bench_smoke.py", MAIN),
    "bench.incident": ("tests/bench/test_bench_smoke.py", MAIN),
    "bench.kinesis_source": ("tests/bench/test_bench_smoke.py", MAIN),
    "bench.latency": ("tests/bench/test_bench_smoke.py", MAIN),
    "bench.latency_efo": ("tests/bench/test_bench_latency_efo.py", MAIN),
    "bench.overhead": ("tests/bench/test_bench_smoke.py", MAIN),
    "bench.reader": ("tests/bench/test_bench_smoke.py", MAIN),
    "bench.report_rows": ("tests/bench/test_report.py", ""),
    "bench.scale": ("tests/bench/test_bench_smoke.py", ""),
    "bench.state": ("tests/bench/test_bench_smoke.py", MAIN),
    "bench.stream": ("tests/bench/test_bench_stream.py", ""),
    "bench.throughput": ("tests/bench/test_bench_smoke.py", MAIN),
}

pytestmark = pytest.mark.unit


def modules(root: Path = ROOT) -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
        if path.name not in ENTRY_FILES
    ]


def mirrored_test(root: Path, module: Path) -> Path:
    relative = module.relative_to(root)
    return root / "tests" / relative.parent / f"test_{relative.stem}.py"


def dotted(root: Path, module: Path) -> str:
    return ".".join(module.relative_to(root).with_suffix("").parts)


LAYOUT_TEST = "tests/test_layout.py"


def _snippet_imports(text: str) -> set[str]:
    """The imports of a string that is Python source (a ``python -c`` snippet
    a test runs in a child); none for any other string."""
    if "import" not in text:
        return set()
    try:
        return imports_of(ast.parse(text))
    except SyntaxError:
        return set()


def imports_of(tree: ast.AST) -> set[str]:
    """Every module ``tree`` imports, at any depth, as dotted names: ``import
    a.b`` and ``from a.b import c`` give ``a.b``, and ``a.b.c`` in case ``c`` is
    a module; ``[..., "-m", "pkg", ...]`` gives ``pkg`` and ``pkg.__main__``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.List | ast.Tuple):
            items = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            found.update(
                module
                for flag, package in itertools.pairwise(items)
                if flag == "-m" and isinstance(package, str)
                for module in (package, f"{package}.__main__")
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(_snippet_imports(node.value))
    return found


def strings_of(tree: ast.AST) -> set[str]:
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def _parsed(path: Path) -> ast.Module | None:
    return ast.parse(path.read_text(encoding="utf-8")) if path.is_file() else None


def reach(root: Path, test_file: Path) -> tuple[set[str], set[str]]:
    """What a test file imports and the strings it holds, with those of the
    ``tests.*`` helpers it imports (a helper that runs ``python -m bench NAME``
    runs it for the test that calls it)."""
    imported: set[str] = set()
    strings: set[str] = set()
    pending, seen = [test_file], set()
    while pending:
        path = pending.pop()
        tree = _parsed(path)
        if path in seen or tree is None:
            continue
        seen.add(path)
        names = imports_of(tree)
        imported |= names
        strings |= strings_of(tree)
        pending.extend(
            root.joinpath(*name.split(".")).with_suffix(".py")
            for name in names
            if name.startswith("tests.")
        )
    return imported, strings


def source_of(root: Path, name: str) -> ast.Module | None:
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return _parsed(path)
    return None


def claim_problem(root: Path, name: str, test_path: str, via: str) -> str | None:
    """Why the claim "``test_path`` covers ``name`` (through ``via``)" does
    not hold, or None if it does."""
    if test_path == LAYOUT_TEST:
        return f"{name}: COVERED_ELSEWHERE may not name {LAYOUT_TEST} itself"
    test_file = root / test_path
    if not test_file.is_file():
        return f"{name}: COVERED_ELSEWHERE names {test_path}, which does not exist"
    imported, strings = reach(root, test_file)
    if name in imported:
        return None
    if not via:
        return f"{name}: {test_path} does not import the module"
    via_tree = source_of(root, via)
    run_by_name = via.endswith(".__main__")
    if (
        via in imported
        and via_tree is not None
        and name in imports_of(via_tree)
        and (not run_by_name or name.rpartition(".")[2] in strings)
    ):
        return None
    return f"{name}: {test_path} does not reach it through {via}"


def problems(root: Path, covered: dict[str, tuple[str, str]]) -> list[str]:
    found: list[str] = []
    names = set()
    for module in modules(root):
        name = dotted(root, module)
        names.add(name)
        if mirrored_test(root, module).is_file():
            if name in covered:
                found.append(
                    f"{name}: has {mirrored_test(root, module).relative_to(root)}; "
                    "remove it from COVERED_ELSEWHERE"
                )
            continue
        if name not in covered:
            found.append(
                f"{name}: expected {mirrored_test(root, module).relative_to(root)} "
                "or an entry in COVERED_ELSEWHERE naming where it is tested"
            )
            continue
        problem = claim_problem(root, name, *covered[name])
        if problem:
            found.append(problem)
    found.extend(
        f"{name}: in COVERED_ELSEWHERE but not a module" for name in covered.keys() - names
    )
    return found


def test_every_module_has_its_test_file_or_names_where_it_is_tested() -> None:
    found = problems(ROOT, COVERED_ELSEWHERE)
    assert not found, "\n".join(found)


def test_the_check_reads_the_tree() -> None:
    names = [dotted(ROOT, m) for m in modules()]
    assert "job.driver" in names and "model.config" in names and "infra.config" in names
    assert len(names) > 150


def _write(root: Path, relative: str, text: str = "") -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(text, encoding="utf-8")


def test_a_module_without_a_test_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, "model/a.py")
    _write(tmp_path, "model/b.py")
    _write(tmp_path, "tests/model/test_a.py")
    assert problems(tmp_path, {}) == [
        "model.b: expected tests/model/test_b.py or an entry in COVERED_ELSEWHERE "
        "naming where it is tested"
    ]


def test_a_claim_of_coverage_is_held_to_the_named_files_imports(tmp_path: Path) -> None:
    _write(tmp_path, "job/sources/kinesis_task.py")
    _write(tmp_path, "job/sources/kinesis_fetch.py")
    _write(tmp_path, "job/sources/kinesis_rows.py")
    _write(
        tmp_path,
        "tests/job/sources/test_kinesis_python.py",
        "from job.sources import kinesis_task\n"
        "# job.sources.kinesis_fetch, job/sources/kinesis_fetch.py: named, never imported\n"
        "NOTE = 'from job.sources import kinesis_fetch is not run'\n",
    )
    python = "tests/job/sources/test_kinesis_python.py"
    claims = {
        "job.sources.kinesis_task": (python, ""),
        "job.sources.kinesis_fetch": (python, ""),
        "job.sources.kinesis_rows": (LAYOUT_TEST, ""),
        "job.gone": ("tests/job/test_gone.py", ""),
    }
    assert problems(tmp_path, claims) == [
        f"job.sources.kinesis_fetch: {python} does not import the module",
        "job.sources.kinesis_rows: COVERED_ELSEWHERE may not name tests/test_layout.py itself",
        "job.gone: in COVERED_ELSEWHERE but not a module",
    ]


def test_the_real_list_names_neither_the_layout_test_nor_a_file_that_does_not_import() -> None:
    assert [name for name, (test, _) in COVERED_ELSEWHERE.items() if test == LAYOUT_TEST] == []
    assert claim_problem(ROOT, "model.contract", LAYOUT_TEST, "") is not None
    # tests/model/test_polling.py covers model.polling, not model.contract.
    assert claim_problem(ROOT, "model.contract", "tests/model/test_polling.py", "") == (
        "model.contract: tests/model/test_polling.py does not import the module"
    )


def test_a_module_run_in_a_child_is_reached_by_its_snippet_or_its_command(
    tmp_path: Path,
) -> None:
    _write(tmp_path, "job/session.py")
    _write(tmp_path, "local/maintain.py")
    _write(tmp_path, "bench/growth.py")
    _write(tmp_path, "bench/state.py")
    _write(tmp_path, "bench/__main__.py", "from bench import growth, state\n")
    _write(
        tmp_path,
        "tests/model/test_conf.py",
        "SNIPPET = 'from job.session import build_session\\nbuild_session()'\n"
        "COMMAND = [sys.executable, '-m', 'local.maintain']\n",
    )
    _write(tmp_path, "tests/bench/run.py", "ARGV = ['python', '-m', 'bench']\n")
    _write(
        tmp_path,
        "tests/bench/test_smoke.py",
        "from tests.bench.run import ARGV\nNAMES = ('growth',)\n",
    )
    main = "bench.__main__"
    claims = {
        "job.session": ("tests/model/test_conf.py", ""),
        "local.maintain": ("tests/model/test_conf.py", ""),
        "bench.growth": ("tests/bench/test_smoke.py", main),
        "bench.state": ("tests/bench/test_smoke.py", main),  # not among the names it runs
    }
    assert problems(tmp_path, claims) == [
        f"bench.state: tests/bench/test_smoke.py does not reach it through {main}"
    ]


def test_a_module_reached_through_another_is_checked_along_the_way(tmp_path: Path) -> None:
    _write(tmp_path, "infra/constructs/roles.py")
    _write(tmp_path, "infra/constructs/alarms.py")
    _write(tmp_path, "infra/stacks/streaming_stack.py", "from infra.constructs import roles\n")
    _write(
        tmp_path, "tests/infra/stacks/test_templates.py", "import infra.stacks.streaming_stack\n"
    )
    via = "infra.stacks.streaming_stack"
    claims = {
        "infra.constructs.roles": ("tests/infra/stacks/test_templates.py", via),
        "infra.constructs.alarms": ("tests/infra/stacks/test_templates.py", via),
        "infra.stacks.streaming_stack": ("tests/infra/stacks/test_templates.py", ""),
    }
    assert problems(tmp_path, claims) == [
        "infra.constructs.alarms: tests/infra/stacks/test_templates.py does not reach it "
        f"through {via}"
    ]
