"""bootstrap/install_jars.sh against a file:// Maven repository of generated jars.

The installer is the last gate before a jar reaches the classpath: it must
install exactly the locked bytes, refuse any other bytes (naming the jar and
both checksums), refuse unverified jars unless told otherwise, and be safe to
run twice.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from infra.emr_step import LockedJar
from tests.bootstrap.shell import run_bash
from tests.bootstrap.test_bootstrap_lib import alone, fake_s3

REPO = Path(__file__).resolve().parents[2]
INSTALLER = REPO / "bootstrap" / "install_jars.sh"
GROUP = "com.example.pinned"


@dataclass(frozen=True)
class Jar:
    artifact: str
    version: str
    content: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def locked(self) -> LockedJar:
        """The lock's entry for these bytes: its file name and Maven path are
        the ones the stack expects (infra.emr_step), so the installer must agree."""
        return LockedJar(GROUP, self.artifact, self.version, self.sha256, "test")

    @property
    def file_name(self) -> str:
        return self.locked.file_name


JARS = (
    Jar("alpha", "2.18.2", b"PK\x03\x04 alpha " + bytes(range(256))),
    Jar("beta", "2.18.2", b"PK\x03\x04 beta " + bytes(range(255, -1, -1))),
)


def publish(repo: Path, jar: Jar, content: bytes | None = None) -> Path:
    path = repo / jar.locked.repository_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(jar.content if content is None else content)
    return path


def write_lock(path: Path, lines: list[str]) -> Path:
    path.write_text("# generated for the test\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def lock_line(jar: Jar, sha: str | None = None) -> str:
    return f"{GROUP}:{jar.artifact}:{jar.version}  {sha or jar.sha256}  test"


def run(
    *args: str | Path, script: Path = INSTALLER, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_bash(script, *args, env=env)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "maven"
    for jar in JARS:
        publish(root, jar)
    return root


def test_installs_locked_jars_when_checksums_match(repo: Path, tmp_path: Path) -> None:
    lock = write_lock(tmp_path / "jars.lock", [lock_line(j) for j in JARS])
    dest = tmp_path / "jars"
    result = run("--lock", lock, "--repo", f"file://{repo}", "--dest", dest)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in dest.iterdir()) == sorted(j.file_name for j in JARS)
    for jar in JARS:
        assert (dest / jar.file_name).read_bytes() == jar.content
    assert "installed com.example.pinned:alpha:2.18.2" in result.stderr


def test_second_run_is_a_no_op_and_removes_unlocked_jars(repo: Path, tmp_path: Path) -> None:
    lock = write_lock(tmp_path / "jars.lock", [lock_line(j) for j in JARS])
    dest = tmp_path / "jars"
    assert run("--lock", lock, "--repo", f"file://{repo}", "--dest", dest).returncode == 0
    stale = dest / "jackson-core-2.15.0.jar"  # a jar a previous lock selected
    stale.write_bytes(b"old")
    shutil.rmtree(repo)  # nothing may be downloaded again
    again = run("--lock", lock, "--repo", f"file://{repo}", "--dest", dest)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("already installed") == len(JARS)
    assert not stale.exists()
    assert "removed jackson-core-2.15.0.jar" in again.stderr


def test_one_byte_off_exits_non_zero_naming_the_jar_and_both_checksums(
    repo: Path, tmp_path: Path
) -> None:
    tampered = bytearray(JARS[1].content)
    tampered[10] ^= 0x01
    publish(repo, JARS[1], bytes(tampered))
    lock = write_lock(tmp_path / "jars.lock", [lock_line(j) for j in JARS])
    dest = tmp_path / "jars"
    result = run("--lock", lock, "--repo", f"file://{repo}", "--dest", dest)
    assert result.returncode == 3
    assert "checksum mismatch for com.example.pinned:beta:2.18.2" in result.stderr
    assert JARS[1].sha256 in result.stderr
    assert hashlib.sha256(bytes(tampered)).hexdigest() in result.stderr
    assert not (dest / JARS[1].file_name).exists()
    assert not list(dest.glob(".*partial"))


def test_unverified_jar_is_refused_unless_the_operator_opts_in(repo: Path, tmp_path: Path) -> None:
    lock = write_lock(
        tmp_path / "jars.lock", [lock_line(JARS[0]), lock_line(JARS[1], "UNVERIFIED")]
    )
    dest = tmp_path / "jars"
    refused = run("--lock", lock, "--repo", f"file://{repo}", "--dest", dest)
    assert refused.returncode == 4
    assert "refusing com.example.pinned:beta:2.18.2" in refused.stderr
    assert not dest.exists() or not list(dest.iterdir())  # refused before touching the node

    allowed = run("--lock", lock, "--repo", f"file://{repo}", "--dest", dest, "--allow-unverified")
    assert allowed.returncode == 0, allowed.stderr
    assert (dest / JARS[1].file_name).read_bytes() == JARS[1].content
    assert f"downloaded sha256={JARS[1].sha256}" in allowed.stderr


def test_only_selects_a_subset_and_rejects_unknown_names(repo: Path, tmp_path: Path) -> None:
    lock = write_lock(
        tmp_path / "jars.lock", [lock_line(JARS[0]), lock_line(JARS[1], "UNVERIFIED")]
    )
    dest = tmp_path / "jars"
    subset = run("--lock", lock, "--repo", f"file://{repo}", "--dest", dest, "--only", "alpha")
    assert subset.returncode == 0, subset.stderr
    assert [p.name for p in dest.iterdir()] == [JARS[0].file_name]
    unknown = run("--lock", lock, "--repo", f"file://{repo}", "--dest", dest, "--only", "gamma")
    assert unknown.returncode == 2
    assert "'gamma'" in unknown.stderr


def test_missing_jar_in_repository_fails_with_the_url(repo: Path, tmp_path: Path) -> None:
    missing = Jar("gamma", "2.18.2", b"never published")
    lock = write_lock(tmp_path / "jars.lock", [lock_line(missing)])
    result = run(
        "--lock", lock, "--repo", f"file://{repo}", "--dest", tmp_path / "jars", "--retries", "2"
    )  # fmt: skip
    assert result.returncode == 5
    assert "download attempt 2 of 2 failed" in result.stderr
    assert f"{GROUP.replace('.', '/')}/gamma/2.18.2/gamma-2.18.2.jar" in result.stderr


def test_launcher_is_installed_executable(repo: Path, tmp_path: Path) -> None:
    lock = write_lock(tmp_path / "jars.lock", [lock_line(JARS[0])])
    target = tmp_path / "bin" / "streaming-spark-submit"
    target.parent.mkdir()
    launcher = REPO / "bootstrap" / "streaming-spark-submit.sh"
    result = run(
        "--lock", lock, "--repo", f"file://{repo}", "--dest", tmp_path / "jars",
        "--launcher", f"file://{launcher}", "--launcher-dest", target,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert target.read_bytes() == launcher.read_bytes()
    assert os.access(target, os.X_OK)


def test_runs_alone_as_on_emr_with_the_library_from_s3(repo: Path, tmp_path: Path) -> None:
    """EMR downloads the script into a directory of its own: the shared library
    arrives through --lib (served here by a fake ``aws s3 cp``)."""
    _, lib_uri, env = fake_s3(tmp_path)
    lock = write_lock(tmp_path / "jars.lock", [lock_line(j) for j in JARS])
    dest = tmp_path / "jars"
    result = run(
        "--lib", lib_uri, "--lock", lock, "--repo", f"file://{repo}", "--dest", dest,
        script=alone(tmp_path, INSTALLER.name),
        env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in dest.iterdir()) == sorted(j.file_name for j in JARS)
    assert f"install_jars: done: {len(JARS)} jar(s) in {dest}" in result.stderr


def test_bootstrap_scripts_are_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck missing: make install puts it on the PATH (apt-get)"
    scripts = sorted((REPO / "bootstrap").glob("*.sh"))
    assert len(scripts) >= 3
    # -x: follow the actions into bootstrap-lib.sh, which they source.
    result = subprocess.run(
        [shellcheck, "-x", "--severity=style", *map(str, scripts)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
