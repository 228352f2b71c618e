"""bootstrap/install_python_deps.sh with a fake interpreter that records pip's argv.

What matters on the cluster: pip runs with --require-hashes on the locked file
(so no unpinned or re-uploaded package can land), for the job's interpreter,
and a missing interpreter or pip fails with a message saying what to fix.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.bootstrap.shell import run_bash
from tests.bootstrap.test_bootstrap_lib import alone, fake_s3

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bootstrap" / "install_python_deps.sh"
LOCK = REPO / "job" / "requirements.lock"


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "python3.11"
    path.write_text(
        "#!/usr/bin/env bash\n"
        'if [ "$*" = "-m pip --version" ]; then exit 0; fi\n'
        'printf "%s\\0" "$@" > "$(dirname "$0")/pip.argv"\n'
        'prev=; for a in "$@"; do\n'
        '  if [ "$prev" = --requirement ]; then cp "$a" "$(dirname "$0")/seen.lock"; fi\n'
        '  prev="$a"\n'
        "done\n",
        encoding="utf-8",
    )
    path.chmod(0o755)
    # Unprivileged runs go through sudo -n: a pass-through stand-in.
    sudo = tmp_path / "sudo"
    sudo.write_text('#!/usr/bin/env bash\n[ "$1" = -n ] && shift\nexec "$@"\n', encoding="utf-8")
    sudo.chmod(0o755)
    return path


def run(
    *args: str | Path,
    bin_dir: Path | None = None,
    script: Path = SCRIPT,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    path = os.environ.get("PATH", "/usr/bin:/bin")
    return run_bash(
        script, *args, env={**(env or {}), "PATH": f"{bin_dir}:{path}" if bin_dir else path}
    )


def test_pip_installs_the_lock_with_required_hashes(fake_python: Path) -> None:
    result = run(
        "--requirements", f"file://{LOCK}", "--python", fake_python,
        "--index-url", "https://mirror/simple", bin_dir=fake_python.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    argv = (fake_python.parent / "pip.argv").read_text(encoding="utf-8").split("\0")[:-1]
    assert argv[:3] == ["-m", "pip", "install"]
    assert "--require-hashes" in argv
    assert argv[argv.index("--index-url") + 1] == "https://mirror/simple"
    assert (fake_python.parent / "seen.lock").read_bytes() == LOCK.read_bytes()


def test_runs_alone_as_on_emr_with_the_library_from_s3(fake_python: Path) -> None:
    """EMR downloads the script into a directory of its own: the shared library
    arrives through --lib (served here by a fake ``aws s3 cp``)."""
    bin_dir = fake_python.parent  # the fake interpreter and sudo
    s3_root, lib_uri, _ = fake_s3(bin_dir)  # its fake aws: copied beside the fakes
    shutil.copy2(bin_dir / "bin" / "aws", bin_dir / "aws")
    result = run(
        "--lib", lib_uri, "--requirements", f"file://{LOCK}", "--python", fake_python,
        bin_dir=bin_dir, script=alone(bin_dir, SCRIPT.name), env={"FAKE_S3": str(s3_root)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (bin_dir / "seen.lock").read_bytes() == LOCK.read_bytes()
    assert "install_python_deps: done" in result.stderr


def test_missing_interpreter_fails_naming_the_fix(tmp_path: Path) -> None:
    result = run("--requirements", LOCK, "--python", tmp_path / "nope")
    assert result.returncode == 6
    assert "set --python to the job's PYSPARK_PYTHON" in result.stderr


def _fake_dnf(bin_dir: Path, provides: Path) -> Path:
    """A ``dnf`` that records its argv and "installs" the interpreter (a copy of
    ``provides``, the fake python) where the script expects it."""
    record = bin_dir / "dnf.argv"
    dnf = bin_dir / "dnf"
    dnf.write_text(
        "#!/usr/bin/env bash\n"
        f'printf "%s\\n" "$*" >> "{record}"\n'
        f'cp "{provides}" "{bin_dir / "installed" / "python3.11"}"\n',
        encoding="utf-8",
    )
    dnf.chmod(0o755)
    return record


def test_missing_interpreter_is_installed_with_the_os_package_manager(
    fake_python: Path,
) -> None:
    """EMR on AL2023: /usr/bin/python3.11 comes from the python3.11 package."""
    bin_dir = fake_python.parent
    (bin_dir / "installed").mkdir()
    target = bin_dir / "installed" / "python3.11"
    record = _fake_dnf(bin_dir, fake_python)
    result = run(
        "--requirements", f"file://{LOCK}", "--python", target, bin_dir=bin_dir,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert record.read_text(encoding="utf-8").splitlines() == [
        "install -y -q python3.11 python3.11-pip"
    ]
    assert "installing python3.11 python3.11-pip with" in result.stderr
    assert (target.parent / "seen.lock").read_bytes() == LOCK.read_bytes()  # then pip ran


def test_present_interpreter_installs_no_os_package(fake_python: Path) -> None:
    bin_dir = fake_python.parent
    (bin_dir / "installed").mkdir()
    record = _fake_dnf(bin_dir, fake_python)
    result = run("--requirements", f"file://{LOCK}", "--python", fake_python, bin_dir=bin_dir)
    assert result.returncode == 0, result.stderr
    assert not record.exists()


def test_lock_pins_every_package_with_hashes() -> None:
    """--require-hashes refuses an entry without a hash; catch it here, not at boot."""
    hashes: dict[str, int] = {}
    current = None
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        pinned = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==\S+", line)  # name[extras]==version
        if pinned:
            current = pinned[1].lower()
            hashes[current] = 0
        elif current and "--hash=sha256:" in line:
            hashes[current] += 1
    assert {"boto3", "confluent-kafka", "aws-msk-iam-sasl-signer-python"} <= set(hashes)
    assert "pyspark" not in hashes  # the EMR release provides it
    assert all(count >= 1 for count in hashes.values()), hashes
    # Native wheels for both x86_64 (m5) and Graviton (m6g/m7g) nodes.
    assert hashes["confluent-kafka"] >= 2
    # The events table's writer: pyiceberg (with extras) and its Rust core.
    assert hashes["pyiceberg"] >= 2
    assert hashes["pyiceberg-core"] >= 2
    assert hashes["pyarrow"] >= 2
