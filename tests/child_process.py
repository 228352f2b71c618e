"""Child processes for the tests that need one: a command run as a user runs
it (``cdk``, ``make``, ``python -m scripts.certs ...``), or a probe of what a
module does at import in a fresh interpreter, where chosen packages cannot be
imported.

One place for how a child runs (from the repository root unless told,
bounded, its output captured as text), for the failure that shows the child's
own error output, and for the import blocker that the probes share."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final, TypedDict, Unpack

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


class How(TypedDict, total=False):
    """How a child runs: its standard input, its directory (the repository
    root), its environment (this process's) and its time limit (300 s)."""

    stdin: str
    cwd: Path
    env: Mapping[str, str]
    timeout: float


def run(argv: Sequence[str], **how: Unpack[How]) -> subprocess.CompletedProcess[str]:
    """``argv`` as ``how`` says, stopped after its time limit; its output
    captured as text. The caller judges the exit code."""
    env = how.get("env")
    return subprocess.run(
        list(argv),
        cwd=how.get("cwd", REPO),
        env=None if env is None else dict(env),
        input=how.get("stdin"),
        capture_output=True,
        text=True,
        timeout=how.get("timeout", 300),
        check=False,
    )


def output(argv: Sequence[str], **how: Unpack[How]) -> str:
    """:func:`run`'s standard output; a child that exits non-zero fails the
    test with the end of its standard error."""
    done = run(argv, **how)
    assert done.returncode == 0, f"{argv[0]} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout


def run_python(*argv: str, **how: Unpack[How]) -> subprocess.CompletedProcess[str]:
    """``python <argv>`` on this interpreter, as :func:`run` runs a command."""
    return run([sys.executable, *argv], **how)


def probe(code: str, *args: str, blocked: Iterable[str] = (), **how: Unpack[How]) -> str:
    """The standard output of ``code`` (``sys.argv[1:]`` being ``args``) run
    by a fresh interpreter, in which importing a top-level package named in
    ``blocked`` raises ``ImportError("blocked: <name>")``; fails the test as
    :func:`output` does."""
    names = sorted(blocked)
    blocker = _BLOCKER.format(blocked=names) if names else ""
    return output([sys.executable, "-c", blocker + code, *args], **how)
