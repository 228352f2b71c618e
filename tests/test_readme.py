"""The README stays a front page: short, naming every user-facing command
(each Makefile target ``make help`` lists), its links pointing at files
that exist. The long parts live in docs/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 150
# A target ``make help`` lists: ``name: prerequisites ## description``.
HELP_TARGET = re.compile(r"^([a-z0-9-]+):.*## ", re.MULTILINE)
LINK = re.compile(r"\]\(([^)#]+)(#[^)]*)?\)")


def documented_targets(makefile: str) -> list[str]:
    return HELP_TARGET.findall(makefile)


def unmentioned(targets: list[str], readme: str) -> list[str]:
    return [t for t in targets if not re.search(rf"\bmake {re.escape(t)}(?![\w-])", readme)]


def test_the_readme_is_at_most_150_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_every_make_help_target_is_in_the_readme() -> None:
    targets = documented_targets((ROOT / "Makefile").read_text(encoding="utf-8"))
    assert {"run", "test", "bench-report", "status"} <= set(targets)
    assert unmentioned(targets, README.read_text(encoding="utf-8")) == []


def test_control_a_target_missing_from_the_readme_is_found() -> None:
    makefile = "run: install ## Run\ntest-fast: install ## Unit tier\nbench: x ## Bench\n"
    readme = "make run, make bench-report, make test-fast-er\n"
    assert unmentioned(documented_targets(makefile), readme) == ["test-fast", "bench"]


def test_every_link_of_the_readme_points_at_a_file() -> None:
    links = [m[0] for m in LINK.findall(README.read_text(encoding="utf-8"))]
    local = [link for link in links if "://" not in link]
    assert local, "control: the README links its documents"
    assert [link for link in local if not (ROOT / link).exists()] == []
