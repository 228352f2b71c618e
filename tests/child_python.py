"""A fresh Python interpreter for the tests that need one: a command run as a
user runs it (``python -m scripts.certs ...``), or a probe of what a module
does at import, where chosen packages cannot be imported.

One place for how the child runs (this interpreter, from the repository root,
bounded, its output captured as text) and for the import blocker that the
probes share."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parents[1]

# Prepended to a probe's code: importing a blocked top-level package (or any of
# its modules) raises ImportError("blocked: <name>").
_BLOCKER: Final = """import sys as _sys
class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("blocked: " + name)
        return None
_sys.meta_path.insert(0, _Blocked())
"""


def run_python(
    *argv: str, stdin: str | None = None, cwd: Path = REPO, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python <argv>`` on this interpreter from ``cwd`` (the repository
    root), stopped after ``timeout`` seconds; its output captured as text. The
    caller judges the exit code."""
    return subprocess.run(
        [sys.executable, *argv],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def probe(
    code: str,
    *args: str,
    blocked: Iterable[str] = (),
    stdin: str | None = None,
    cwd: Path = REPO,
    timeout: float = 300,
) -> str:
    """The standard output of ``code`` (``sys.argv[1:]`` being ``args``) run
    by a fresh interpreter from ``cwd``, in which importing a top-level
    package named in ``blocked`` raises ``ImportError("blocked: <name>")``. A
    child that exits non-zero fails the test with its standard error."""
    names = sorted(blocked)
    blocker = _BLOCKER.format(blocked=names) if names else ""
    done = run_python("-c", blocker + code, *args, stdin=stdin, cwd=cwd, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
