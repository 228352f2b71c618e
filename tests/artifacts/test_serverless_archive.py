"""The EMR Serverless dependency archive (artifacts/serverless_archive.py): every
locked package at its pinned version, built for the target's platform tags,
and the Spark settings that point the release's interpreter at it."""

from __future__ import annotations

import re
import tarfile
from pathlib import Path

import pytest

from artifacts import serverless_archive as sa
from emr.releases import release_for

LOCK_TEXT = (sa.REPO_ROOT / sa.LOCK).read_text(encoding="utf-8")


def test_locked_pins_reads_every_pin_with_extras_and_versions() -> None:
    pins = sa.locked_pins(LOCK_TEXT)
    names = [line for line in LOCK_TEXT.splitlines() if re.match(r"^[A-Za-z0-9]", line)]
    assert len(pins) == len(names) > 30
    assert pins["pyiceberg"] == "0.12.0"  # written with extras in the lock
    assert pins["confluent-kafka"] == "2.16.1"
    assert pins["python-dateutil"] == "2.9.0.post0"


def test_aarch64_target_is_the_release_python_on_arm64_manylinux() -> None:
    spec = sa.target("aarch64")
    assert release_for(sa.SERVERLESS_RELEASE).pythons[0] == "/usr/bin/python3.11"
    assert (spec.python, spec.abi) == ("3.11", "cp311")
    assert "manylinux_2_28_aarch64" in spec.platforms
    assert "manylinux_2_17_aarch64" in spec.platforms  # pip does not expand 2_28 to it
    assert "manylinux_2_35_aarch64" not in spec.platforms  # AL2023 has glibc 2.34
    args = spec.pip_target_args()
    assert args[:6] == ["--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]
    assert args.count("--platform") == len(spec.platforms) == 19
    assert sa.target("local").platforms == ()


def test_unknown_platform_and_missing_archive_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(sa.ArchiveError, match=r"'x86'.*allowed: aarch64, local"):
        sa.target("x86")
    with pytest.raises(sa.ArchiveError, match=r"job-python-deps\.tar\.gz is missing.*make install"):
        sa.archive_path("aarch64", root=tmp_path)


def test_archive_spark_conf_points_driver_and_executors_at_the_archive() -> None:
    conf = sa.archive_spark_conf("s3://bucket/deps/job-python-deps.tar.gz")
    assert conf == {
        "spark.archives": "s3://bucket/deps/job-python-deps.tar.gz#jobdeps",
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": "/usr/bin/python3.11",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON": "/usr/bin/python3.11",
        "spark.emr-serverless.driverEnv.PYTHONPATH": "./jobdeps",
        "spark.executorEnv.PYSPARK_PYTHON": "/usr/bin/python3.11",
        "spark.executorEnv.PYTHONPATH": "./jobdeps",
    }
    with pytest.raises(sa.ArchiveError, match="without '#'"):
        sa.archive_spark_conf("s3://bucket/deps.tar.gz#env")


def test_archive_spark_conf_can_unpack_the_job_package_beside_the_dependencies() -> None:
    """The Python streaming source's planner does not see --py-files: app.zip
    travels as an archive too, on the same PYTHONPATH."""
    conf = sa.archive_spark_conf("s3://b/d.tar.gz", package_zip_uri="s3://b/v1/app.zip")
    assert conf["spark.archives"] == "s3://b/d.tar.gz#jobdeps,s3://b/v1/app.zip#jobapp"
    assert conf["spark.emr-serverless.driverEnv.PYTHONPATH"] == "./jobdeps:./jobapp"
    assert conf["spark.executorEnv.PYTHONPATH"] == "./jobdeps:./jobapp"
    with pytest.raises(sa.ArchiveError, match="without '#' or ','"):
        sa.archive_spark_conf("s3://b/d.tar.gz", package_zip_uri="s3://b/a.zip,s3://b/c.zip")


def test_pack_is_byte_stable_and_skips_caches(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "pkg" / "__pycache__").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("x = 1\n")
    (site / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    first = sa.pack(site)
    (site / "pkg" / "__init__.py").touch()
    assert sa.pack(site) == first
    archive = tmp_path / "a.tar.gz"
    archive.write_bytes(first)
    with tarfile.open(archive) as tar:
        assert tar.getnames() == ["pkg", "pkg/__init__.py"]


def _tag_fits(tag: str, spec: sa.Target) -> bool:
    python, abi, platform = tag.split("-")
    if platform == "any":
        return python.startswith("py") or python == spec.abi
    return platform in spec.platforms and (abi == spec.abi or (abi == "abi3" and "cp3" in python))


@pytest.mark.parametrize("platform", ["aarch64", "local"])
def test_built_archive_holds_every_locked_package_at_its_pin(platform: str) -> None:
    """The archive ``make install`` built (its target depends on the lock)."""
    archive = sa.archive_path(platform)
    dists = sa.archive_distributions(archive)
    pins = sa.locked_pins(LOCK_TEXT)
    assert {name: dists[name].version for name in pins if name in dists} == pins
    assert set(dists) == set(pins), "the archive holds exactly the lock's packages"
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert not [n for n in names if n.startswith("bin/") or "__pycache__" in n]
    # No interpreter and no virtualenv: the release's Python runs the job.
    interpreter = re.compile(r"(^|/)(python3?(\.\d+)?|pyvenv\.cfg)$")
    assert not [m.name for m in members if m.isfile() and interpreter.search(m.name)]
    if platform == "aarch64":
        spec = sa.target("aarch64")
        binary = {n: d.tags for n, d in dists.items() if not d.tags[0].endswith("-any")}
        assert {"pyarrow", "confluent-kafka", "pydantic-core", "numpy"} <= set(binary)
        misfits = {
            n: tags for n, tags in binary.items() if not any(_tag_fits(t, spec) for t in tags)
        }
        assert misfits == {}
        assert any(n.endswith(".cpython-311-aarch64-linux-gnu.so") for n in names)
        assert not any("x86_64" in n for n in names if n.endswith(".so"))


def test_a_rebuild_tries_the_downloaded_wheels_offline_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def pip(args: list[str]) -> None:
        calls.append(args)
        if args[0] == "download" and "--no-index" in args:
            raise sa.ArchiveError("pip download failed (1): no such wheel")
        if args[0] == "install":
            site = Path(args[args.index("--target") + 1])
            (site / "bin").mkdir(parents=True)
            (site / "dep.py").write_text("x = 1\n")

    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "requirements.lock").write_text("dep==1 --hash=sha256:00\n")
    monkeypatch.setattr(sa, "_pip", pip)
    archive = sa.build_archive("aarch64", root=tmp_path)
    assert [c[0] for c in calls] == ["download", "download", "install"]
    assert "--no-index" in calls[0] and "--no-index" not in calls[1]
    assert "--no-index" in calls[2] and "--require-hashes" in calls[2]
    assert "manylinux_2_28_aarch64" in calls[2]
    with tarfile.open(archive) as tar:
        assert tar.getnames() == ["dep.py"]  # bin/ dropped
