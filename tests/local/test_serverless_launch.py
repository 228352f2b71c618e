"""The local launch of a serverless instance (local/serverless_launch.py): the
spark-submit command comes from the StartJobRun request the stack sends, its
s3:// URIs mapped to the staged files; what is missing fails here."""

from __future__ import annotations

import os
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from artifacts import serverless_archive
from infra import emr_step
from local import serverless_launch as sl
from local.emulators import Endpoints
from local.harness import build_job_config, load_example_instances

ENDPOINTS = Endpoints(aws_url="http://127.0.0.1:1", kafka_bootstrap="127.0.0.1:2")


@pytest.fixture
def instance() -> Any:
    found = {i.instance_id: i for i in load_example_instances()}["orders-eu-west-1"]
    assert found.compute == "serverless"
    return found


@pytest.fixture
def small_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for build/serverless/local's archive (100+ MiB): one module."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "locked_dep.py").write_text("VERSION = '1'\n")
    archive = tmp_path / "job-python-deps.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(site / "locked_dep.py", arcname="locked_dep.py")
    monkeypatch.setattr(sl, "archive_path", lambda platform: archive)
    return archive


def _plan(instance: Any, root: Path) -> sl.LaunchPlan:
    config = build_job_config(instance, root, ENDPOINTS)
    return sl.plan(instance, config, root, {"PATH": "/usr/bin", "PYTHONPATH": "/repo"})


def _confs(command: list[str]) -> dict[str, str]:
    pairs = [command[i + 1] for i, part in enumerate(command) if part == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def test_the_command_is_the_job_run_request_with_local_files(
    instance: Any, small_archive: Path, tmp_path: Path
) -> None:
    root = tmp_path / "run"
    plan = _plan(instance, root)
    driver = plan.request["jobDriver"]["sparkSubmit"]
    assert plan.request["mode"] == "STREAMING"
    assert driver["entryPointArguments"][-2:] == ["--platform", "serverless"]
    command = plan.command
    assert command[0].endswith("pyspark/bin/spark-submit")
    # entry point and arguments: the staged main.py, the staged config, --platform serverless
    tail = command[-5:]
    assert Path(tail[0]).name == "main.py" and Path(tail[0]).is_file()
    assert tail[1] == "--config" and Path(tail[2]).name == "job-config.json"
    assert Path(tail[2]).read_text(encoding="utf-8").startswith("{")
    assert tail[3:] == ["--platform", "serverless"]
    jars = command[command.index("--jars") + 1]
    assert Path(jars).is_file() and jars.endswith("streaming-job.jar")
    assert Path(command[command.index("--py-files") + 1]).name == "app.zip"
    conf = _confs(command)
    deps, app = conf["spark.archives"].split(",")
    assert deps == f"{small_archive}#jobdeps"
    assert app.endswith("app.zip#jobapp")
    # The application's defaults (one source with EMR), less Glue and service-only keys.
    assert conf["spark.dynamicAllocation.enabled"] == "false"
    assert conf["spark.master"] == "local[2]"
    # The instance's state partitions (one on its light shape), not the laptop's two.
    assert conf["spark.sql.shuffle.partitions"] == str(instance.shuffle_partitions) == "1"
    assert "spark.jars" not in conf  # the jar comes from the request's --jars only
    assert not [k for k in conf if k.startswith("spark.emr-serverless.")]
    assert "spark.hadoop.hive.metastore.client.factory.class" not in conf
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == sys.executable
    assert conf["spark.executorEnv.PYTHONPATH"] == "./jobdeps:./jobapp"
    # The driver's environment from driverEnv; the repo is not on the path.
    assert plan.env["PYTHONPATH"] == "./jobdeps:./jobapp"
    assert plan.env["PYSPARK_PYTHON"] == plan.env["PYSPARK_DRIVER_PYTHON"] == sys.executable
    # The working directory holds the unpacked archives, as the service's does.
    assert (plan.cwd / "jobdeps" / "locked_dep.py").is_file()
    assert (plan.cwd / "jobapp" / "job" / "driver.py").is_file()
    assert "target serverless" in plan.describe() and str(small_archive) in plan.describe()


@pytest.mark.parametrize(
    ("name", "wrong"),
    [("ENTRY_POINT", "mian.py"), ("JOB_JAR", "missing-job.jar")],
)
@pytest.mark.usefixtures("small_archive")
def test_a_wrong_entry_point_or_a_missing_jar_fails_the_launch(
    instance: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, wrong: str
) -> None:
    # The package layout of the run (infra.emr_step.JobPackage) reads both names.
    monkeypatch.setattr(emr_step, name, wrong)
    with pytest.raises(sl.LaunchError, match=rf"{wrong}: maps to .* which does not exist"):
        _plan(instance, tmp_path / "run")


def test_a_missing_archive_fails_the_launch_naming_make_install(
    instance: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        sl, "archive_path", lambda platform: serverless_archive.archive_path(platform, tmp_path)
    )
    with pytest.raises(serverless_archive.ArchiveError, match="make install"):
        _plan(instance, tmp_path / "run")


def test_another_release_python_is_refused() -> None:
    with pytest.raises(sl.LaunchError, match=r"python3\.99.*allowed: a release Python"):
        sl.local_interpreter("/usr/bin/python3.99")
    assert sl.local_interpreter(f"/usr/bin/python3.{sys.version_info.minor}") == sys.executable


def test_an_unknown_uri_names_the_staged_prefixes(tmp_path: Path) -> None:
    artifacts = sl.ArtifactMap((("s3://b/pkg", tmp_path),))
    with pytest.raises(sl.LaunchError, match=r"s3://other/x: not a staged artifact.*s3://b/pkg"):
        artifacts.local("s3://other/x")
    (tmp_path / "a.zip").write_bytes(b"")
    assert artifacts.map_value("--x") == "--x"
    assert artifacts.map_value("k=s3://b/pkg/a.zip#al") == f"k={tmp_path / 'a.zip'}#al"


def test_an_emr_instance_keeps_the_step_launch() -> None:
    emr = {i.instance_id: i for i in load_example_instances()}["orders-ap-northeast-2"]
    assert not sl.is_serverless(emr)
    assert sl.describe(emr).startswith("target emr")


def _zip(path: Path, text: str, mtime_ns: int) -> Path:
    with zipfile.ZipFile(path, "w") as zipped:
        zipped.writestr("job_version.txt", text)
    os.utime(path, ns=(mtime_ns, mtime_ns))
    return path


def test_each_version_of_an_archive_is_unpacked_once_and_apart(tmp_path: Path) -> None:
    """Two versions of the same size (a handover's old and new package) get
    their own directories: the old job may still run from its own."""
    cache = tmp_path / "unpacked"
    old = sl.unpacked(_zip(tmp_path / "app.zip", "v1", 10**18), cache)
    size = (tmp_path / "app.zip").stat().st_size
    (old / "marker").write_text("left by the first unpack")
    assert sl.unpacked(tmp_path / "app.zip", cache) == old
    assert (old / "marker").is_file()  # reused, not unpacked again
    new = sl.unpacked(_zip(tmp_path / "app.zip", "v2", 2 * 10**18), cache)
    assert (tmp_path / "app.zip").stat().st_size == size  # what a key of size alone mixes up
    assert new != old
    assert (old / "job_version.txt").read_text() == "v1"
    assert (new / "job_version.txt").read_text() == "v2"


def test_pruning_keeps_only_the_archive_s_newest_version(tmp_path: Path) -> None:
    cache = tmp_path / "unpacked"
    old = sl.unpacked(_zip(tmp_path / "deps.zip", "v1", 10**18), cache, prune=True)
    new = sl.unpacked(_zip(tmp_path / "deps.zip", "v2", 2 * 10**18), cache, prune=True)
    assert sorted(p.name for p in cache.iterdir()) == [new.name]
    assert not old.exists()
