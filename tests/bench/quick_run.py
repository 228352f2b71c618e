"""One way for the bench smoke tests to run ``python -m bench NAME --quick``
in a child process (its own JVM and emulators) and fail with its output, and
to read back the result it wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


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


def quick_result(name: str, out: Path, timeout: float) -> tuple[dict[str, Any], str]:
    """:func:`run_quick`, then the result it wrote (checked to be this
    benchmark's, in quick mode, with its PNG chart beside it) and its stdout."""
    stdout = run_quick(name, out, timeout)
    result: dict[str, Any] = json.loads((out / f"{name}.json").read_text(encoding="utf-8"))
    assert result["benchmark"] == name and result["mode"] == "quick"
    assert (out / f"{name}.png").read_bytes().startswith(PNG_SIGNATURE), f"{name}.png"
    return result, stdout
