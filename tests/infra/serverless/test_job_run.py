"""The StartJobRun request and the application's spark-defaults
(infra/serverless/job_run.py): the API's shape, the same job package as the
EMR step, one Spark conf source with the EMR cluster, the restart budget split."""

from __future__ import annotations

import pytest

from infra.config_sections import EmrConfig
from infra.constructs.emr_cluster import cluster_configurations
from infra.emr_step import StepSpec, build_step
from infra.serverless.config import ServerlessConfig, WorkerConfig
from infra.serverless.job_run import (
    JobRunSpec,
    application_spark_defaults,
    executor_sizing,
    restart_budget_split,
    start_job_run_request,
)
from infra.serverless.job_run_handler import REQUEST_FIELDS
from model.jvm import JAR_NAME
from model.spark_conf import GLUE_HIVE_SITE, streaming_conf

PACKAGE = "s3://artifacts-bucket/artifacts/job/0123abcd"
ARCHIVE = {
    "spark.archives": f"{PACKAGE}/job-python-deps.tar.gz#environment",
    "spark.emr-serverless.driverEnv.PYSPARK_PYTHON": "./environment/bin/python",
    "spark.executorEnv.PYSPARK_PYTHON": "./environment/bin/python",
}


def _spec(**overrides: object) -> JobRunSpec:
    values: dict[str, object] = {
        "application_id": "00fabcdefghij",
        "execution_role_arn": "arn:aws:iam::123456789012:role/job",
        "name": "streaming-orders-eu-west-1-0123abcd",
        "package_uri": PACKAGE,
        "max_failed_attempts_per_hour": 4,
        "log_group_name": "/streaming/orders-eu-west-1/job",
        "archive_conf": ARCHIVE,
    }
    values.update(overrides)
    return JobRunSpec(**values)  # type: ignore[arg-type]


def test_the_request_is_a_streaming_run_without_timeout_and_with_the_retry_policy() -> None:
    body = start_job_run_request(_spec())
    # The job-run handler saves a run's request for a later start from what
    # GetJobRun returns: a field outside REQUEST_FIELDS would be lost there.
    assert set(body) == {"applicationId", "executionRoleArn", *REQUEST_FIELDS}
    assert body["mode"] == "STREAMING"
    assert body["executionTimeoutMinutes"] == 0
    assert body["retryPolicy"] == {"maxFailedAttemptsPerHour": 4}
    assert body["applicationId"] == "00fabcdefghij"
    logging = body["configurationOverrides"]["monitoringConfiguration"][
        "cloudWatchLoggingConfiguration"
    ]
    assert logging["enabled"] is True
    assert logging["logGroupName"] == "/streaming/orders-eu-west-1/job"
    assert logging["logTypes"]["SPARK_EXECUTOR"] == ["STDOUT", "STDERR"]


def test_the_run_starts_the_same_job_package_as_the_emr_step() -> None:
    submit = start_job_run_request(_spec())["jobDriver"]["sparkSubmit"]
    step = build_step(
        StepSpec(
            step_name="s",
            app_name="a",
            package_uri=PACKAGE,
            stop_marker_uri="s3://b/stop",
            jar_files=("jackson-core-2.20.0.jar",),
        )
    )
    step_args = step["HadoopJarStep"]["Args"]
    assert submit["entryPoint"] == f"{PACKAGE}/main.py"
    assert submit["entryPoint"] in step_args
    assert submit["entryPointArguments"][:2] == ["--config", f"{PACKAGE}/job-config.json"]
    assert step_args[-2:] == submit["entryPointArguments"][:2]
    assert submit["entryPointArguments"][2:] == ["--platform", "serverless"]
    words = submit["sparkSubmitParameters"].split(" ")
    assert words[words.index("--py-files") + 1] == f"{PACKAGE}/app.zip"
    assert words[words.index("--jars") + 1] == f"{PACKAGE}/{JAR_NAME}"
    confs = {words[i + 1] for i, word in enumerate(words) if word == "--conf"}
    assert confs == {f"{key}={value}" for key, value in ARCHIVE.items()}


@pytest.mark.parametrize("attempts", [0, 11])
def test_the_retry_policy_stays_within_the_apis_bounds(attempts: int) -> None:
    with pytest.raises(ValueError, match=r"max_failed_attempts_per_hour: .*allowed: 1-10"):
        _spec(max_failed_attempts_per_hour=attempts)


def test_an_archive_setting_with_a_space_is_refused() -> None:
    with pytest.raises(ValueError, match="no spaces"):
        _spec(archive_conf={"spark.archives": "s3://b/a b.tar.gz#env"})


def test_the_restart_budget_is_split_so_both_add_up_to_it() -> None:
    for budget in range(2, 12):
        service, supervisor = restart_budget_split(budget)
        assert service + supervisor == budget
        assert 1 <= service <= 10
        assert supervisor >= 1
    assert restart_budget_split(5) == (4, 1)
    for bad in (1, 12):
        with pytest.raises(ValueError, match=r"supervisor\.max_restarts_per_hour"):
            restart_budget_split(bad)


def test_the_applications_spark_defaults_and_the_clusters_come_from_one_source() -> None:
    shape = ServerlessConfig(executor=WorkerConfig(cpu=2, memory_gb=8), executor_count=2)
    serverless = application_spark_defaults(shape)
    (cluster_defaults, hive_site, _yarn) = cluster_configurations(
        EmrConfig(tls_certificates_s3_uri="s3://certs-b/a.zip")
    )
    emr = cluster_defaults["configurationProperties"]
    # Dynamic allocation off with a fixed executor count, in both.
    for conf in (serverless, emr):
        assert conf["spark.dynamicAllocation.enabled"] == "false"
        assert conf["spark.sql.catalogImplementation"] == "hive"
    assert serverless["spark.executor.instances"] == "2"
    assert serverless["spark.executor.cores"] == "2"
    # The Glue catalog: a classification on EMR, a Spark (Hadoop) property here.
    assert hive_site["configurationProperties"] == GLUE_HIVE_SITE
    for key, value in GLUE_HIVE_SITE.items():
        assert serverless[f"spark.hadoop.{key}"] == value
    # Every streaming setting the cluster gets, the application gets, with the
    # shape's sizes (YARN-only keys aside).
    own = streaming_conf(executor_sizing(shape))
    for key, value in own.items():
        if not key.startswith("spark.yarn."):
            assert serverless[key] == value, key
    assert not [key for key in serverless if key.startswith("spark.yarn.")]
    assert set(emr) - set(serverless) == {k for k in emr if k.startswith("spark.yarn.")}


def test_the_workers_memory_and_disks_fit_the_shape() -> None:
    conf = application_spark_defaults(ServerlessConfig())
    assert conf["spark.driver.cores"] == "1"
    # Heap plus overhead is the whole worker (docs/sizing.md, "Serverless shape").
    assert conf["spark.driver.memory"] == "1024m"  # a 2 GB driver
    assert conf["spark.driver.memoryOverhead"] == "1024m"  # 384 MB + 640 MB: the Python driver
    assert conf["spark.executor.memory"] == "1024m"  # a 2 GB executor
    assert conf["spark.executor.memoryOverhead"] == "1024m"
    shape = ServerlessConfig()
    for role, worker in (("driver", shape.driver), ("executor", shape.executor)):
        heap = int(conf[f"spark.{role}.memory"].removesuffix("m"))
        overhead = int(conf[f"spark.{role}.memoryOverhead"].removesuffix("m"))
        assert heap + overhead == worker.memory_gb * 1024, role
    assert conf["spark.emr-serverless.driver.disk"] == "20G"
    assert conf["spark.emr-serverless.executor.disk"] == "20G"
