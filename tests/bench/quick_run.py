"""One way for the bench smoke tests to run ``python -m bench NAME --quick``
in a child process (its own JVM and emulators) and fail with its output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_quick(name: str, out: Path, timeout: float) -> str:
    """Run benchmark ``name`` in quick mode, results in ``out``; its stdout.
    A non-zero exit fails the calling test with the end of both streams."""
    done = subprocess.run(
        [sys.executable, "-m", "bench", name, "--quick", "--out-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout
