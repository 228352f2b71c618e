"""The ``compute`` choice of an instance and its ``serverless`` section.

``"compute": "emr"`` (the default) runs the job on the instance's own EMR
cluster (infra/constructs/emr_cluster.py); ``"compute": "serverless"`` runs it
as a STREAMING job run on an EMR Serverless application of its own
(infra/serverless/app.py, docs/serverless.md). The ``serverless``
section sizes that application: one driver worker, ``executor_count``
executor workers, their log retention. A serverless instance needs no TLS
zip and no ``emr`` values: its ``emr`` section is not used.

Worker sizes are the ones EMR Serverless accepts: 1, 2, 4, 8 or 16 vCPU, each
with a memory range and step, and 20-200 GB of disk, of which only what is
beyond 20 GB is billed
(https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/app-behavior.html,
"Supported worker configurations"). Spark's memory overhead (10 %, at least
384 MB, same page) must fit inside the worker, and it is where the Python
processes live (the Python driver, the executors' Python workers):
:attr:`WorkerConfig.overhead_mb` is what ``spark.driver.memoryOverhead`` /
``spark.executor.memoryOverhead`` get (None: Spark's default) and
:attr:`WorkerConfig.spark_memory_mb` what ``spark.driver.memory`` /
``spark.executor.memory`` get, the rest of the worker.

The defaults come from the measured peaks (docs/sizing.md, "Serverless
shape"), as PSS, what the processes hold together (RSS counts the pages the
forked Python workers share once in each): the one local JVM, driver and
executor together, 702 MiB; the Python driver and its planners 593 MiB; the
executors' Python workers 284 MiB. Both workers are 1 vCPU / 2 GB: a
1024 MB heap plus a 1024 MB overhead, which holds Spark's 384 MB for the
JVM's own off-heap memory and 640 MB for the Python side (the driver's
593 MiB; the executor's Python workers and RocksDB's off-heap state). Even
a full 1024 MB heap with the JVM's off-heap part leaves the Python driver its
measured peak.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, Self

from pydantic import Field, PositiveInt, model_validator

from emr.releases import SERVERLESS_PYTHON
from model.config_kit import Allowed, ConfigModel, bad_value

ComputeName = Literal["emr", "serverless"]
ArchitectureName = Literal["ARM64", "X86_64"]

# vCPU -> (min GB, max GB, step GB): app-behavior.html, "Supported worker configurations".
WORKER_MEMORY_GB: Final[dict[int, tuple[int, int, int]]] = {
    1: (2, 8, 1),
    2: (4, 16, 1),
    4: (8, 30, 1),
    8: (16, 60, 4),
    16: (32, 120, 8),
}
MIN_DISK_GB: Final = 20  # also the disk each worker gets without extra charge
MAX_DISK_GB: Final = 200
# Spark's default memory overhead: 10 % of the container, at least 384 MB (same page).
OVERHEAD_SHARE: Final = 0.10
MIN_OVERHEAD_MB: Final = 384
# The retentions CloudWatch Logs accepts that an instance may choose (days);
# the same list as infra.config's LOG_RETENTION_DAYS (this module cannot import it).
SERVERLESS_LOG_RETENTION_DAYS: Final = (7, 14, 30, 60, 90, 180, 365)
# The interpreter name the dependency archive is built for (the job's lock).
ARCHIVE_PYTHON: Final = SERVERLESS_PYTHON.rsplit("/", 1)[-1]


def spark_memory_mb(worker_memory_gb: int) -> int:
    """The largest ``spark.*.memory`` (MB, a multiple of 128) whose memory plus
    Spark's default overhead (10 %, at least 384 MB) fits a worker of
    ``worker_memory_gb``."""
    worker_mb = worker_memory_gb * 1024
    fits = min(worker_mb - MIN_OVERHEAD_MB, int(worker_mb / (1 + OVERHEAD_SHARE)))
    return fits // 128 * 128


# The smallest heap a worker's overhead may leave (MB): below it the JVM of a
# streaming driver or executor does not start its query (docs/sizing.md).
MIN_HEAP_MB: Final = 1024
# The default workers (the module docstring gives the reasoning).
DRIVER_MEMORY_GB: Final = 2
DRIVER_OVERHEAD_MB: Final = 1024
EXECUTOR_MEMORY_GB: Final = 2
EXECUTOR_OVERHEAD_MB: Final = 1024


class WorkerConfig(ConfigModel):
    """One EMR Serverless worker: vCPU, memory (GB) and disk (GB)."""

    cpu: Annotated[
        int, Allowed(lambda n: n in WORKER_MEMORY_GB, ", ".join(map(str, WORKER_MEMORY_GB)))
    ] = 1
    memory_gb: PositiveInt = 2
    disk_gb: int = Field(default=MIN_DISK_GB, ge=MIN_DISK_GB, le=MAX_DISK_GB)
    # spark.*.memoryOverhead (MB); None: Spark's default (10 %, at least 384 MB).
    overhead_mb: int | None = Field(default=None, ge=MIN_OVERHEAD_MB)

    @model_validator(mode="after")
    def _memory_fits_the_cpu(self) -> Self:
        low, high, step = WORKER_MEMORY_GB[self.cpu]
        if not low <= self.memory_gb <= high or (self.memory_gb - low) % step:
            raise bad_value(
                self.memory_gb,
                f"{low}-{high} GB in steps of {step} GB for a {self.cpu} vCPU worker "
                "(EMR Serverless app-behavior page)",
                "memory_gb",
            )
        if self.overhead_mb is not None and self.spark_memory_mb < MIN_HEAP_MB:
            raise bad_value(
                self.overhead_mb,
                f"at most {self.memory_gb * 1024 - MIN_HEAP_MB} MB on a {self.memory_gb} GB "
                f"worker (it must leave a heap of at least {MIN_HEAP_MB} MB)",
                "overhead_mb",
            )
        return self

    @property
    def spark_memory_mb(self) -> int:
        """The heap: what the overhead leaves of the worker (a multiple of 128 MB)."""
        if self.overhead_mb is None:
            return spark_memory_mb(self.memory_gb)
        return (self.memory_gb * 1024 - self.overhead_mb) // 128 * 128


class ServerlessConfig(ConfigModel):
    """The EMR Serverless application of a ``"compute": "serverless"`` instance.

    The default shape: an ARM64 1 vCPU / 2 GB driver and one 1 vCPU / 2 GB
    executor, each a 1024 MB heap and a 1024 MB overhead,
    no pre-initialized capacity (module docstring). ``executor_count`` is fixed
    (dynamic allocation off, model/spark_conf.py): the application's maximum
    capacity is the driver plus exactly these executors, so no second copy of
    the job and no scale-out can start on it.
    """

    architecture: ArchitectureName = "ARM64"
    driver: WorkerConfig = Field(
        default_factory=lambda: WorkerConfig(
            memory_gb=DRIVER_MEMORY_GB, overhead_mb=DRIVER_OVERHEAD_MB
        )
    )
    executor: WorkerConfig = Field(
        default_factory=lambda: WorkerConfig(
            memory_gb=EXECUTOR_MEMORY_GB, overhead_mb=EXECUTOR_OVERHEAD_MB
        )
    )
    executor_count: int = Field(default=1, ge=1, le=50)
    # The job run's CloudWatch log group (driver and executor stdout/stderr).
    log_retention_days: Annotated[
        int,
        Allowed(
            lambda d: d in SERVERLESS_LOG_RETENTION_DAYS,
            ", ".join(map(str, SERVERLESS_LOG_RETENTION_DAYS)),
        ),
    ] = 30
    # The interpreter of the Serverless image that runs the job (PYSPARK_PYTHON
    # of the driver and executors): the one setting, its default and what is
    # unverified about it in emr/releases.py (SERVERLESS_PYTHON). Its version
    # must be the dependency archive's.
    python: Annotated[
        str,
        Allowed(
            lambda path: path.startswith("/") and path.rsplit("/", 1)[-1] == ARCHIVE_PYTHON,
            f"an absolute path to a {ARCHIVE_PYTHON} interpreter (the dependency archive's Python)",
        ),
    ] = SERVERLESS_PYTHON

    @property
    def max_vcpu(self) -> int:
        return self.driver.cpu + self.executor.cpu * self.executor_count

    @property
    def max_memory_gb(self) -> int:
        return self.driver.memory_gb + self.executor.memory_gb * self.executor_count

    @property
    def max_disk_gb(self) -> int:
        return self.driver.disk_gb + self.executor.disk_gb * self.executor_count


# What a serverless instance's unused ``emr.tls_certificates_s3_uri`` holds when
# it declares none (infra.config fills it): nothing reads it, no cluster exists.
NO_TLS_ON_SERVERLESS: Final = "s3://unused-on-emr-serverless/no-tls-certificates.zip"

# The service's retries and the supervisor's restarts share the restart
# budget, one each at least (infra/serverless/job_run.py, restart_budget_split);
# checked before the sections are parsed (a value of the wrong type is left to
# its own field's check).
MIN_SERVERLESS_RESTARTS: Final = 2


def serverless_problem(data: Mapping[str, Any]) -> None:
    """Raise the error naming the field when a serverless instance's
    ``supervisor`` section cannot be split with the service's retries."""
    supervisor = data.get("supervisor")
    restarts = supervisor.get("max_restarts_per_hour") if isinstance(supervisor, Mapping) else None
    if isinstance(restarts, int) and _integer(restarts) and restarts < MIN_SERVERLESS_RESTARTS:
        raise bad_value(
            restarts,
            f'>= {MIN_SERVERLESS_RESTARTS} on "compute": "serverless" (the service retries '
            "with all but one of them, the supervisor restarts with the last)",
            "supervisor",
            "max_restarts_per_hour",
        )


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
