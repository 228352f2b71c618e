"""The supervisor Lambda's staged code imports and runs on its own: a fresh
interpreter with only the staged directory on its path (and boto3, which the
Lambda runtime brings) loads the handler and decides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from artifacts.packaging import SUPERVISOR_HANDLER, stage_supervisor

REPO = Path(__file__).resolve().parents[3]

PROBE = """
import importlib, sys
module, _, name = sys.argv[1].rpartition(".")
handler = importlib.import_module(module)
assert callable(getattr(handler, name))
from infra.supervisor.decision import Observation, Policy, SupervisorState, decide
print(decide(Observation(10, running=True), SupervisorState(), Policy()).action)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("model", "infra"))
print(",".join(loaded))
"""


def test_the_staged_handler_imports_from_the_stage_alone(tmp_path: Path) -> None:
    staged = stage_supervisor(REPO, tmp_path)
    assert stage_supervisor(REPO, tmp_path) == staged, "same sources, same directory"
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path[:0] = [{str(staged)!r}]\n" + PROBE,
         SUPERVISOR_HANDLER],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    action, loaded = result.stdout.split()
    assert action == "none"
    assert "model.config" not in loaded.split(","), "pydantic is not in the Lambda runtime"
    assert all(Path(staged, *m.split(".")).with_suffix(".py").exists()
               or Path(staged, *m.split("."), "__init__.py").exists()
               for m in loaded.split(","))  # fmt: skip
