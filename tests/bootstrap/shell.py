"""Running the bootstrap scripts as EMR does: ``bash script args`` in a child."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def run_bash(
    script: str | Path, *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Never raises on a non-zero exit (tests assert the code); at most 60 s."""
    return subprocess.run(
        ["bash", str(script), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})},
    )
