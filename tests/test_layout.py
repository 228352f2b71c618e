"""Tests mirror the code: ``tests/<package path>/test_<module>.py`` for every
module of the project's packages (issue 42).

A module tested elsewhere is named in :data:`COVERED_ELSEWHERE` with the test
file that covers it, and, where that file reaches it through another module
(a stack through its constructs, ``python -m bench`` through a benchmark's
name), that module. The check holds each claim to the files: the named test
file exists and names the module (its dotted name, its path, ``from
<package> import <module>``, or, for a benchmark, its name quoted, as ``python -m
bench growth`` is given it), or names the ``via`` module, whose source in turn names
the module. A module with neither fails here, naming the test file it lacks.
The list is what is left to mirror: a new module gets its own test file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "job", "infra", "ops", "local", "scripts", "bench", "integ")
# Entry points with no logic of their own: ``python -m <package>`` shims.
ENTRY_FILES = frozenset({"__init__.py", "__main__.py"})

# module -> (the test file that covers it, the module it is reached through or "").
COVERED_ELSEWHERE: dict[str, tuple[str, str]] = {
    "model.config_kit": ("tests/test_layout.py", ""),
    "model.contract": ("tests/model/test_exit_record.py", ""),
    "job.jvm": ("tests/model/test_jvm.py", ""),
    "job.main": ("tests/deploy/test_app_package.py", ""),
    "job.session": ("tests/model/test_spark_conf.py", ""),
    "job.sources.kinesis_task": ("tests/test_layout.py", ""),
    "infra.constructs.alarm_topic": ("tests/test_layout.py", ""),
    "infra.constructs.alarms": ("tests/infra/constructs/test_tuning.py", ""),
    "infra.constructs.buckets": ("tests/infra/constructs/test_tuning.py", ""),
    "infra.constructs.catalog": ("tests/infra/constructs/test_events_table.py", ""),
    "infra.constructs.emr_cluster": ("tests/infra/stacks/test_serverless_stack.py", ""),
    "infra.constructs.emr_disk_key": ("tests/test_layout.py", ""),
    "infra.constructs.instance": ("tests/test_layout.py", ""),
    "infra.constructs.job_deployment": ("tests/deploy/test_docs_current.py", ""),
    "infra.constructs.logs_key": ("tests/infra/constructs/test_tuning.py", ""),
    "infra.constructs.metrics": ("tests/test_layout.py", ""),
    "infra.constructs.network": ("tests/test_layout.py", ""),
    "infra.constructs.serverless_app": ("tests/test_layout.py", ""),
    "infra.emr_step": ("tests/infra/test_serverless_job_run.py", ""),
    "infra.job_jar": ("tests/test_layout.py", ""),
    "infra.packaging": ("tests/infra/supervisor/test_serverless.py", ""),
    "infra.prices": ("tests/infra/test_cost.py", ""),
    "infra.releases": ("tests/infra/test_config.py", ""),
    "infra.s3_keys": ("tests/infra/supervisor/test_handler.py", ""),
    "infra.stacks.application": ("tests/infra/stacks/test_instance_schema.py", ""),
    "infra.stacks.streaming_stack": ("tests/test_layout.py", ""),
    "ops.aggregation": ("tests/test_layout.py", ""),
    "ops.arguments": ("tests/scripts/test_arguments.py", ""),
    "ops.events": ("tests/ops/test_stream_writer.py", ""),
    "ops.local_run": ("tests/scripts/test_produce.py", ""),
    "ops.topic_end": ("tests/test_layout.py", ""),
    "integ.app": ("tests/integ/test_check.py", ""),
    "local.harness": ("tests/local/test_efo_endpoint.py", ""),
    "local.maintain": ("tests/job/table/test_commit.py", ""),
    "local.metrics_dump": ("tests/local/test_metrics_dump_offsets.py", ""),
    "local.report_cli": ("tests/local/test_report.py", ""),
    "local.spark_stages": ("tests/test_layout.py", ""),
    "local.table": ("tests/e2e/test_crash_loop.py", ""),
    "scripts.command": ("tests/test_layout.py", ""),
    "scripts.preflight.checks": ("tests/scripts/preflight/test_serverless.py", ""),
    "scripts.preflight.result": ("tests/scripts/preflight/test_tls.py", ""),
    "scripts.preflight.shared_cluster": ("tests/test_layout.py", ""),
    "scripts.redeploy": ("tests/scripts/test_arguments.py", ""),
    "scripts.reprocess.hook": ("tests/scripts/reprocess/test_run.py", ""),
    "bench.dedup": ("tests/bench/test_bench_smoke.py", ""),
    "bench.efo": ("tests/bench/test_bench_efo.py", ""),
    "bench.framework": ("tests/bench/test_latency_produce.py", ""),
    "bench.growth": ("tests/bench/test_bench_smoke.py", ""),
    "bench.incident": ("tests/bench/test_bench_smoke.py", ""),
    "bench.kinesis_source": ("tests/bench/test_bench_smoke.py", ""),
    "bench.latency": ("tests/bench/test_bench_smoke.py", ""),
    "bench.latency_efo": ("tests/bench/test_bench_latency_efo.py", ""),
    "bench.overhead": ("tests/bench/test_bench_smoke.py", ""),
    "bench.reader": ("tests/bench/test_bench_smoke.py", ""),
    "bench.report_rows": ("tests/bench/test_report.py", ""),
    "bench.scale": ("tests/bench/test_bench_smoke.py", ""),
    "bench.state": ("tests/bench/test_dedup_figures.py", ""),
    "bench.stream": ("tests/bench/test_bench_stream.py", ""),
    "bench.throughput": ("tests/bench/test_report.py", ""),
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


def names_module(text: str, name: str) -> bool:
    package, _, leaf = name.rpartition(".")
    pattern = (
        rf"\b{re.escape(name)}\b|{re.escape(name.replace('.', '/'))}\.py"
        rf"|from {re.escape(package)} import [^\n]*\b{re.escape(leaf)}\b"
    )
    if package == "bench":  # a benchmark is run by its name: python -m bench growth
        pattern += rf"|\"{re.escape(leaf)}\""
    return re.search(pattern, text) is not None


def source_of(root: Path, name: str) -> str:
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py", base / "__main__.py"):
        if path.is_file():
            return path.read_text(encoding="utf-8")
    return ""


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
        test_path, via = covered[name]
        test_file = root / test_path
        if not test_file.is_file():
            found.append(f"{name}: COVERED_ELSEWHERE names {test_path}, which does not exist")
            continue
        text = test_file.read_text(encoding="utf-8")
        if names_module(text, name):
            continue
        if not via:
            found.append(f"{name}: {test_path} does not name the module")
        elif not (names_module(text, via) and names_module(source_of(root, via), name)):
            found.append(f"{name}: {test_path} does not reach it through {via}")
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


def test_a_claim_of_coverage_is_held_to_the_named_file(tmp_path: Path) -> None:
    _write(tmp_path, "job/sources/kinesis_task.py")
    _write(tmp_path, "job/sources/kinesis_fetch.py")
    _write(
        tmp_path,
        "tests/job/sources/test_kinesis_python.py",
        "from job.sources import kinesis_task\n",
    )
    claims = {
        "job.sources.kinesis_task": ("tests/job/sources/test_kinesis_python.py", ""),
        "job.sources.kinesis_fetch": ("tests/job/sources/test_kinesis_python.py", ""),
        "job.gone": ("tests/job/test_gone.py", ""),
    }
    assert problems(tmp_path, claims) == [
        "job.sources.kinesis_fetch: tests/job/sources/test_kinesis_python.py does not name "
        "the module",
        "job.gone: in COVERED_ELSEWHERE but not a module",
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
