"""model/job_version.py: the version the job records in its lease and the one
the supervisor derives from the stack's step are the same digest, of the same
``--config`` URI; a command line without one has no version."""

from __future__ import annotations

from infra.emr_step import StepSpec, build_step
from model.job_version import CONFIG_OPTION, DIGEST_CHARS, config_uri_in, version_in, version_of

V1 = "s3://artifacts/artifacts/job/aaaa/job-config.json"
V2 = "s3://artifacts/artifacts/job/bbbb/job-config.json"


def _step_args(package_uri: str) -> list[str]:
    spec = StepSpec(
        step_name="streaming-orders-x",
        app_name="app",
        package_uri=package_uri,
        stop_marker_uri="s3://data/control/orders/stop",
        jar_files=("a-1.jar",),
        checkpoint_uri="s3://data/checkpoints/orders/",
    )
    return list(build_step(spec)["HadoopJarStep"]["Args"])


def test_the_step_and_the_job_name_the_same_version() -> None:
    args = _step_args("s3://artifacts/artifacts/job/aaaa")
    # The job is started with the step's --config (job/driver.py hashes args.config).
    assert config_uri_in(args) == V1
    assert version_in(args) == version_of(V1)
    assert version_in(_step_args("s3://artifacts/artifacts/job/bbbb")) == version_of(V2)


def test_versions_are_short_stable_and_tell_packages_apart() -> None:
    assert version_of(V1) == version_of(V1)
    assert version_of(V1) != version_of(V2)
    assert len(version_of(V1)) == DIGEST_CHARS
    assert int(version_of(V1), 16) >= 0  # hexadecimal: safe in JSON and in a shell's sed


def test_the_last_config_counts_and_none_without_one() -> None:
    # The launcher's own options come first; the job's arguments last.
    assert config_uri_in(["--lease", "x", CONFIG_OPTION, "first", "--", CONFIG_OPTION, V2]) == V2
    assert config_uri_in(["spark-submit", "main.py"]) is None
    assert config_uri_in([CONFIG_OPTION]) is None  # no value after it
    assert version_in([]) is None
