"""bench/framework.py's record of the code measured: a commit in a git
checkout, "unknown" in an unpacked archive, never git's error text."""

from __future__ import annotations

import re
from pathlib import Path

from bench.framework import _git_output, code_version


def test_outside_a_checkout_git_gives_nothing(tmp_path: Path) -> None:
    assert _git_output(tmp_path, "rev-parse", "--short", "HEAD") == ""
    assert _git_output(tmp_path, "status", "--porcelain") == ""


def test_the_commit_is_a_hash_or_unknown() -> None:
    version = code_version()
    assert version["commit"] == "unknown" or re.fullmatch(r"[0-9a-f]{4,40}", version["commit"])
    assert all(not line.startswith("fatal") for line in version["job_files_changed_since_commit"])
