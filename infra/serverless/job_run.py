"""The EMR Serverless job run that runs the streaming job: ONE builder of the
``StartJobRun`` request and of the application's ``spark-defaults``.

The stack's ``Custom::ServerlessJobRun`` (infra/serverless/app.py)
sends :func:`start_job_run_request` as it is (its property ``StartJobRun``),
the supervisor restarts a down job with the same request
(infra/supervisor/serverless.py), and the local launcher (local/serverless_launch.py, ``make run``)
runs the same entry point, arguments and spark-submit parameters. The request
has exactly the shape the API takes
(https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_StartJobRun.html):

* ``mode`` STREAMING and ``executionTimeoutMinutes`` 0: a streaming run never
  times out (release 7.1.0 or later;
  https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/jobs-spark-streaming-getting-started.html,
  https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/streaming-jobs.html);
* ``retryPolicy.maxFailedAttemptsPerHour`` (1-10): the service's share of the
  instance's restart budget (:func:`restart_budget_split`);
* ``jobDriver.sparkSubmit``: the same job package as the EMR step
  (infra/emr_step.py): ``main.py`` with ``--config <job-config.json>``,
  ``app.zip`` through ``--py-files``, the job's jar through ``--jars``, and the
  Python dependency archive (artifacts/serverless_archive.py) through
  ``spark.archives`` with the interpreter's environment;
* ``configurationOverrides.monitoringConfiguration``: driver and executor
  stdout/stderr to the instance's CloudWatch log group (only the driver's are
  sent by default; API CloudWatchLoggingConfiguration).

What varies per job version (the package prefix, the archive) is in the run's
request, never in the application: an application can be updated only when
it is CREATED or STOPPED
(https://docs.aws.amazon.com/emr-serverless/latest/APIReference/API_UpdateApplication.html),
and a streaming job keeps it STARTED. The application's ``spark-defaults``
(:func:`application_spark_defaults`) hold what only the instance's shape
changes: the streaming conf of model/spark_conf.py, the EMR cluster's source.

Pinned Jackson jars: they do not apply here. On EMR they go FIRST on the
nodes' ``extraClassPath`` (a bootstrap installs them, the launcher prepends
them) so that EMR's own additions to the class path (EMRFS, Hadoop, the Glue
client) cannot put a second Jackson ahead of Spark's. Serverless has no
bootstrap and no node class path to prepend to, and ``--jars`` would only add
a copy AFTER the release's own jars. The release's Spark is the job's Spark
(4.1.1, emr/releases.py) and its page lists Jackson 2.20, the version the
lock pins (docs/deploy.md, "Pinned jars"), so the run uses the release's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from infra.emr_step import JobPackage
from infra.serverless.config import ServerlessConfig
from model.spark_conf import ExecutorSizing, serverless_conf

MODE: Final = "STREAMING"
EXECUTION_TIMEOUT_MINUTES: Final = 0
# retryPolicy.maxFailedAttemptsPerHour accepts 1-10 (API RetryPolicy).
MIN_SERVICE_ATTEMPTS: Final = 1
MAX_SERVICE_ATTEMPTS: Final = 10
# The entry-point argument that tells the job it runs on EMR Serverless, so a
# refused configuration or checkpoint (exit 2) ends the run in a way the
# service does not retry (job/outcome.py, ``process_status``).
PLATFORM_ARGUMENTS: Final = ("--platform", "serverless")
# CloudWatch log types: the driver's and the executors' stdout and stderr
# (API CloudWatchLoggingConfiguration; only the driver's are sent by default).
LOG_TYPES: Final = {
    "SPARK_DRIVER": ["STDOUT", "STDERR"],
    "SPARK_EXECUTOR": ["STDOUT", "STDERR"],
}
# The worker disk properties of EMR Serverless's Spark
# (https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/jobs-spark.html).
DRIVER_DISK_KEY: Final = "spark.emr-serverless.driver.disk"
EXECUTOR_DISK_KEY: Final = "spark.emr-serverless.executor.disk"


def restart_budget_split(max_restarts_per_hour: int) -> tuple[int, int]:
    """(the service's ``maxFailedAttemptsPerHour``, the supervisor's restarts
    an hour) that add up to the instance's ``supervisor.max_restarts_per_hour``.

    The service retries a failed attempt from the checkpoint on its own, inside
    the same run; only when those retries are spent does the run end FAILED.
    The supervisor then restarts it (a new run, the same request) with what
    is left of the budget, and alarms once that is spent. The supervisor needs
    at least one restart, the service at least one attempt: a budget of 1
    cannot be split."""
    if not 2 <= max_restarts_per_hour <= MAX_SERVICE_ATTEMPTS + 1:
        raise ValueError(
            f"supervisor.max_restarts_per_hour: {max_restarts_per_hour}; allowed on "
            f'"compute": "serverless": 2-{MAX_SERVICE_ATTEMPTS + 1} (the service retries '
            "with all but one of them, the supervisor restarts with the last)"
        )
    service = max_restarts_per_hour - 1
    return service, max_restarts_per_hour - service


def executor_sizing(shape: ServerlessConfig) -> ExecutorSizing:
    """The fixed executors of the shape, in model/spark_conf.py's terms."""
    return ExecutorSizing(
        instances=shape.executor_count,
        cores=shape.executor.cpu,
        memory_mb=shape.executor.spark_memory_mb,
        memory_overhead_mb=shape.executor.overhead_mb,
    )


def application_spark_defaults(
    shape: ServerlessConfig, shuffle_partitions: int | None = None
) -> dict[str, str]:
    """The application's ``spark-defaults`` classification: model/spark_conf.py's
    streaming conf (the EMR cluster's source) sized to the shape's workers,
    plus their disks. ``shuffle_partitions``: the instance's fixed count
    (``InstanceConfig.shuffle_partitions``, kept from creation like the EMR
    cluster's; None: the shape's cores)."""
    conf = serverless_conf(
        executor_sizing(shape),
        driver_cores=shape.driver.cpu,
        driver_memory_mb=shape.driver.spark_memory_mb,
        driver_memory_overhead_mb=shape.driver.overhead_mb,
    )
    if shuffle_partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    conf[DRIVER_DISK_KEY] = f"{shape.driver.disk_gb}G"
    conf[EXECUTOR_DISK_KEY] = f"{shape.executor.disk_gb}G"
    return conf


@dataclass(frozen=True)
class JobRunSpec(JobPackage):
    """Everything the request depends on; values may be CDK tokens at synth.

    ``package_uri`` is the versioned S3 prefix holding ``app.zip``, ``main.py``,
    ``job-config.json`` and the job's jar (infra/constructs/job_deployment.py),
    ``archive_conf`` the dependency archive's Spark settings
    (``artifacts.serverless_archive.archive_spark_conf``)."""

    application_id: str
    execution_role_arn: str
    name: str
    package_uri: str
    max_failed_attempts_per_hour: int
    log_group_name: str
    log_stream_prefix: str = "job"
    archive_conf: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        attempts = self.max_failed_attempts_per_hour
        if not MIN_SERVICE_ATTEMPTS <= attempts <= MAX_SERVICE_ATTEMPTS:
            raise ValueError(
                f"max_failed_attempts_per_hour: {attempts}; allowed: "
                f"{MIN_SERVICE_ATTEMPTS}-{MAX_SERVICE_ATTEMPTS} (API RetryPolicy)"
            )
        for key, value in self.archive_conf.items():
            if " " in key or " " in value:
                raise ValueError(
                    f"archive_conf: {key}={value!r}; allowed: no spaces "
                    "(sparkSubmitParameters is split on spaces)"
                )

    @property
    def entry_point_arguments(self) -> list[str]:
        return [*self.config_arguments, *PLATFORM_ARGUMENTS]

    @property
    def spark_submit_parameters(self) -> str:
        """``--py-files``, ``--jars`` and the archive's ``--conf`` pairs, one
        string as the API takes it."""
        parts = self.package_arguments()
        for key, value in sorted(self.archive_conf.items()):
            parts += ["--conf", f"{key}={value}"]
        return " ".join(parts)


def start_job_run_request(spec: JobRunSpec) -> dict[str, Any]:
    """The ``StartJobRun`` request body, as ``emr-serverless.start_job_run(**body)`` takes it."""
    return {
        "applicationId": spec.application_id,
        "executionRoleArn": spec.execution_role_arn,
        "name": spec.name,
        "mode": MODE,
        "executionTimeoutMinutes": EXECUTION_TIMEOUT_MINUTES,
        "retryPolicy": {"maxFailedAttemptsPerHour": spec.max_failed_attempts_per_hour},
        "jobDriver": {
            "sparkSubmit": {
                "entryPoint": spec.entry_point,
                "entryPointArguments": spec.entry_point_arguments,
                "sparkSubmitParameters": spec.spark_submit_parameters,
            }
        },
        "configurationOverrides": {
            "monitoringConfiguration": {
                "cloudWatchLoggingConfiguration": {
                    "enabled": True,
                    "logGroupName": spec.log_group_name,
                    "logStreamNamePrefix": spec.log_stream_prefix,
                    "logTypes": {kind: list(types) for kind, types in LOG_TYPES.items()},
                }
            }
        },
    }
