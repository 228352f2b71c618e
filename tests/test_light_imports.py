"""Synth and the operator commands must not need pyspark.

``cdk synth``, ``make preflight`` and the operator commands run where the
Spark wheel (about 400 MB) need not be installed: a synth-only CI, an
operator's laptop. They import the shared model (``model/``) for names and
settings, and a module-level ``import pyspark`` anywhere on that path would
make every one of them need the wheel. The architecture test reads imports as
text; this one runs them: every module of ``model/``, ``emr/``, ``infra/``, ``artifacts/``
(whose jar build imports pyspark only inside its functions), ``scripts/`` and
``producer/`` is imported in a child process where ``pyspark`` cannot be
imported, and a failure names the module and the project module whose import
line pulled pyspark in.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.child_process import probe

ROOT = Path(__file__).resolve().parents[1]

LIGHT_PACKAGES = ("model", "emr", "infra", "artifacts", "scripts", "producer")

# Run in the child, where pyspark cannot be imported: each module imported in
# turn; per failing module, the project frames of its traceback.
_CHILD = r"""
import importlib, json, sys, traceback

root = sys.argv[1]
failed = {}
for module in json.loads(sys.stdin.read()):
    try:
        importlib.import_module(module)
    except BaseException as exc:
        frames = [
            f"{f.filename[len(root) + 1:]}:{f.lineno}"
            for f in traceback.extract_tb(exc.__traceback__)
            if f.filename.startswith(root + "/")
        ]
        failed[module] = {"error": f"{type(exc).__name__}: {exc}", "frames": frames}
print(json.dumps(failed))
"""


def light_modules(root: Path = ROOT) -> list[str]:
    """Every module of the light packages."""
    found: list[str] = []
    for top in LIGHT_PACKAGES:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            # A command's __main__ runs main() only under ``__name__ == "__main__"``
            # (test_commands_run_only_as_main), so importing it is safe.
            found.append(".".join(parts))
    return found


def import_without_pyspark(modules: list[str], root: Path = ROOT) -> dict[str, dict[str, object]]:
    """The modules that fail to import when pyspark cannot be imported, with
    the error and the project frames (``path:line``) that led to it."""
    out = probe(_CHILD, str(root), blocked=("pyspark",), stdin=json.dumps(modules), cwd=root)
    result: dict[str, dict[str, object]] = json.loads(out.strip().splitlines()[-1])
    return result


def test_synth_and_the_commands_import_without_pyspark() -> None:
    failed = import_without_pyspark(light_modules())
    lines = [
        f"{module}: {info['error']} (via {' -> '.join(map(str, info['frames']))})"
        for module, info in sorted(failed.items())
    ]
    assert not failed, "needs pyspark at import:\n" + "\n".join(lines)


def test_the_guard_covers_the_commands_and_synth() -> None:
    """Guards against a check that passes because it imported nothing."""
    modules = light_modules()
    assert "infra.stacks.application" in modules
    assert "infra.constructs.dashboard" in modules
    assert "scripts.reprocess" in modules
    assert "producer.producer" in modules
    assert len(modules) > 40


def test_a_module_that_needs_pyspark_is_named(tmp_path: Path) -> None:
    (tmp_path / "heavy.py").write_text("import pyspark.sql\n", encoding="utf-8")
    (tmp_path / "light.py").write_text("import json\n", encoding="utf-8")
    (tmp_path / "via.py").write_text("import heavy\n", encoding="utf-8")
    failed = import_without_pyspark(["light", "via"], tmp_path)
    assert set(failed) == {"via"}
    assert "blocked: pyspark" in str(failed["via"]["error"])
    assert failed["via"]["frames"] == ["via.py:1", "heavy.py:1"]


def test_commands_run_only_as_main() -> None:
    """Each light package's ``__main__`` guards its ``main()``, so the import
    check above can import it without running the command."""
    entries = [p for top in LIGHT_PACKAGES for p in sorted((ROOT / top).rglob("__main__.py"))]
    assert entries, "no command entry found under the light packages"
    unguarded = [
        str(p.relative_to(ROOT))
        for p in entries
        if 'if __name__ == "__main__":' not in p.read_text(encoding="utf-8")
    ]
    assert unguarded == []
