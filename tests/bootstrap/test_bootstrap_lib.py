"""bootstrap/bootstrap-lib.sh, the bootstrap actions' shared helpers, and how it
reaches a node.

EMR downloads each bootstrap action's script alone into a directory of its own,
so the tests run the actions the same way: copied alone into an empty
directory, with the library's URI passed first (``--lib``), s3:// served by a
fake ``aws``. Run from the repository, an action uses the copy beside it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.bootstrap.shell import run_bash

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP = REPO / "bootstrap"
LIB = BOOTSTRAP / "bootstrap-lib.sh"
ACTIONS = ("install_python_deps.sh", "install_jars.sh")
HELPERS = ("log", "fail", "fetch", "as_root")

FAKE_AWS = """#!/usr/bin/env bash
# aws s3 cp [options] s3://bucket/key DST, served from $FAKE_S3/bucket/key.
echo "$*" >> "$FAKE_S3/aws.calls"
src="${@: -2:1}"
dst="${@: -1}"
[ "$1 $2" = "s3 cp" ] || exit 2
cp -- "$FAKE_S3/${src#s3://}" "$dst"
"""


def fake_bin(tmp_path: Path, scripts: dict[str, str]) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in scripts.items():
        path = bin_dir / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o755)
    return bin_dir


def fake_s3(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    """A bucket holding the library, served by a fake ``aws`` first on PATH;
    returns the fake S3 root, the library URI and the environment to run with."""
    root = tmp_path / "s3"
    key = root / "artifacts-bucket" / "artifacts" / "bootstrap" / "abc123" / LIB.name
    key.parent.mkdir(parents=True)
    shutil.copyfile(LIB, key)
    bin_dir = fake_bin(tmp_path, {"aws": FAKE_AWS})
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_S3": str(root)}
    return root, f"s3://artifacts-bucket/artifacts/bootstrap/abc123/{LIB.name}", env


def alone(tmp_path: Path, script: str) -> Path:
    """The action as EMR leaves it: downloaded into a directory of its own."""
    target = tmp_path / "bootstrap-actions" / "1" / script
    target.parent.mkdir(parents=True)
    shutil.copyfile(BOOTSTRAP / script, target)
    return target


def with_lib(tmp_path: Path, body: str, name: str = "action.sh") -> Path:
    """A script that sources the library, the way the actions do, then runs ``body``."""
    path = tmp_path / name
    path.write_text(f'set -euo pipefail\n. "{LIB}"\n{body}\n', encoding="utf-8")
    return path


def test_log_lines_carry_a_utc_timestamp_and_the_script_name(tmp_path: Path) -> None:
    result = run_bash(with_lib(tmp_path, 'log "hello world"', name="install_things.sh"))
    assert result.returncode == 0
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ install_things: hello world\n", result.stderr
    ), result.stderr


def test_fail_logs_an_error_and_exits_with_its_code(tmp_path: Path) -> None:
    result = run_bash(with_lib(tmp_path, 'fail 7 "pip install failed"; echo unreachable'))
    assert result.returncode == 7
    assert "ERROR: pip install failed" in result.stderr
    assert "unreachable" not in result.stdout


def test_fetch_copies_paths_and_file_uris(tmp_path: Path) -> None:
    source = tmp_path / "source.txt"
    source.write_text("locked\n", encoding="utf-8")
    script = with_lib(
        tmp_path, f'fetch "{source}" "{tmp_path}/a"\nfetch "file://{source}" "{tmp_path}/b"'
    )
    assert run_bash(script).returncode == 0
    assert (tmp_path / "a").read_text(encoding="utf-8") == "locked\n"
    assert (tmp_path / "b").read_text(encoding="utf-8") == "locked\n"


def test_fetch_gives_up_after_its_attempts_naming_the_source(tmp_path: Path) -> None:
    script = with_lib(tmp_path, f'fetch "{tmp_path}/missing" "{tmp_path}/out" 2 || exit 9')
    result = run_bash(script)
    assert result.returncode == 9
    assert result.stderr.count("download attempt") == 2
    assert f"download attempt 2 of 2 failed: {tmp_path}/missing" in result.stderr


def test_fetch_reads_s3_through_the_aws_cli_with_time_limits(tmp_path: Path) -> None:
    s3_root, uri, env = fake_s3(tmp_path)
    script = with_lib(tmp_path, f'fetch "{uri}" "{tmp_path}/lib-copy"')
    assert run_bash(script, env=env).returncode == 0
    assert (tmp_path / "lib-copy").read_bytes() == LIB.read_bytes()
    call = (s3_root / "aws.calls").read_text(encoding="utf-8")
    assert "--cli-connect-timeout 10" in call and "--cli-read-timeout 60" in call


def test_as_root_goes_through_non_interactive_sudo_when_not_root(tmp_path: Path) -> None:
    bin_dir = fake_bin(
        tmp_path,
        {
            "id": '#!/usr/bin/env bash\n[ "$1" = -u ] && echo 1000 || /usr/bin/id "$@"\n',
            "sudo": '#!/usr/bin/env bash\necho "$*" > "$(dirname "$0")/sudo.argv"\n',
        },
    )
    script = with_lib(tmp_path, "as_root install -m 0755 a b")
    result = run_bash(script, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert result.returncode == 0, result.stderr
    assert (bin_dir / "sudo.argv").read_text(encoding="utf-8") == "-n install -m 0755 a b\n"


def _function_names(path: Path) -> set[str]:
    pattern = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(\)\s*\{", re.MULTILINE)
    return set(pattern.findall(path.read_text(encoding="utf-8")))


def test_the_helpers_live_only_in_the_library() -> None:
    assert set(HELPERS) <= _function_names(LIB)
    for action in ACTIONS:
        duplicated = _function_names(BOOTSTRAP / action) & set(HELPERS)
        assert not duplicated, f"{action} defines {sorted(duplicated)} again"


# ---- how the library reaches an action on a node ----------------------------


@pytest.mark.parametrize("script", ACTIONS)
def test_an_action_alone_without_lib_says_how_to_pass_it(tmp_path: Path, script: str) -> None:
    result = run_bash(alone(tmp_path, script), "--help")
    assert result.returncode == 2
    assert "bootstrap-lib.sh; pass --lib URI first" in result.stderr


@pytest.mark.parametrize("script", ACTIONS)
def test_an_unreadable_lib_uri_fails_as_a_download(tmp_path: Path, script: str) -> None:
    _, _, env = fake_s3(tmp_path)
    missing = "s3://artifacts-bucket/artifacts/bootstrap/nope/bootstrap-lib.sh"
    result = run_bash(alone(tmp_path, script), "--lib", missing, "--help", env=env)
    assert result.returncode == 5
    assert f"cannot read the bootstrap library {missing}" in result.stderr


@pytest.mark.parametrize(
    ("script", "option"),
    [("install_python_deps.sh", "--python"), ("install_jars.sh", "--lock")],
)
def test_lib_must_come_first(script: str, option: str) -> None:
    result = run_bash(BOOTSTRAP / script, option, "/x", "--lib", LIB)
    assert result.returncode == 2
    assert "--lib must be the first argument" in result.stderr


@pytest.mark.parametrize("script", ACTIONS)
def test_an_action_alone_loads_the_lib_from_s3(tmp_path: Path, script: str) -> None:
    """The usage text is printed by the library's ``log``: it was loaded."""
    s3_root, uri, env = fake_s3(tmp_path)
    result = run_bash(alone(tmp_path, script), "--lib", uri, "--bogus", env=env)
    assert result.returncode == 2
    assert re.search(rf"Z {script.removesuffix('.sh')}: unknown argument: --bogus", result.stderr)
    assert uri in (s3_root / "aws.calls").read_text(encoding="utf-8")
