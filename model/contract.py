"""The contract between the job and the infrastructure that watches it.

Metric names, the namespace, the dimension and the resource names are read by
the PySpark job (which publishes) and by the CDK alarms (which watch). Keeping
them in one import-light module means a rename cannot leave an alarm watching
a metric nobody publishes. No heavy imports here: ``infra/`` imports it.
"""

from __future__ import annotations

from typing import Final

# Each instance publishes in a namespace of its own, so the job role's
# ``cloudwatch:namespace`` condition (infra/constructs/alarms.py) can name
# exactly it: with one shared namespace, instance A could publish
# ``Instance=<B>`` data points and keep B's heartbeat alarm quiet. A namespace
# is 1-255 ASCII characters, ``/`` allowed, not starting with ``AWS/``
# (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_Metric.html,
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricData.html);
# ``StreamingPipeline/<domain>-<region>`` is at most 18 + 31 + 1 + ~15 characters.
METRIC_NAMESPACE_PREFIX: Final = "StreamingPipeline"
INSTANCE_DIMENSION: Final = "Instance"

# Per-batch metrics published by job.monitoring and alarmed on by infra.
BATCH_DURATION_MS: Final = "BatchDurationMs"
INPUT_ROWS: Final = "InputRows"
INPUT_ROWS_PER_SECOND: Final = "InputRowsPerSecond"
PROCESSED_ROWS_PER_SECOND: Final = "ProcessedRowsPerSecond"
FAILURE_RECORDS: Final = "FailureRecords"
END_TO_END_LATENCY_MS: Final = "EndToEndLatencyMs"
SOURCE_LAG_MS: Final = "SourceLagMs"
SCHEDULING_DELAY_RATIO: Final = "SchedulingDelayRatio"
HEARTBEAT: Final = "Heartbeat"
# Failure records per reason (the job's failure taxonomy, model.record.REASONS):
# one series per reason, with the Reason dimension besides the instance's, so
# it is not in ALL_METRICS (readers of those query the instance dimension only).
FAILURE_RECORDS_BY_REASON: Final = "FailureRecordsByReason"
REASON_DIMENSION: Final = "Reason"

# Valid events carrying each key that job.event_fields does not declare (the
# key is kept in the row's undeclared_fields column): one series per key name,
# with the Key dimension besides the instance's: one series for each of the
# first UNDECLARED_KEY_SERIES keys the instance sees (kept across batches and
# restarts), every later key counted under OTHER_KEYS, so a producer that
# invents keys cannot create series without bound (job.monitoring). The
# table keeps every key. Not in ALL_METRICS, like the per-reason counts.
UNDECLARED_KEY_RECORDS: Final = "UndeclaredKeyRecords"
KEY_DIMENSION: Final = "Key"
UNDECLARED_KEY_SERIES: Final = 20
OTHER_KEYS: Final = "(other)"
# Where the job keeps the keys it named (a JSON list), beside the lease.
KEY_SERIES_NAME: Final = "_undeclared_key_series"
# A dimension value is 1-1024 ASCII characters, not all whitespace, no control
# characters (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_Dimension.html);
# a key that cannot be one is counted under this value.
UNNAMEABLE_KEY: Final = "(not ascii)"
_MAX_DIMENSION_VALUE: Final = 1024


def key_series_path(checkpoint_location: str) -> str:
    return checkpoint_location.rstrip("/") + "/" + KEY_SERIES_NAME


def key_dimension_value(key: str) -> str:
    """The Key dimension's value for an undeclared key: the key itself when
    CloudWatch takes it as a dimension value, else :data:`UNNAMEABLE_KEY`."""
    printable = all(" " <= ch <= "~" for ch in key)
    if printable and key.strip() and len(key) <= _MAX_DIMENSION_VALUE:
        return key
    return UNNAMEABLE_KEY


ALL_METRICS: Final = (
    BATCH_DURATION_MS,
    INPUT_ROWS,
    INPUT_ROWS_PER_SECOND,
    PROCESSED_ROWS_PER_SECOND,
    FAILURE_RECORDS,
    END_TO_END_LATENCY_MS,
    SOURCE_LAG_MS,
    SCHEDULING_DELAY_RATIO,
    HEARTBEAT,
)

# Resource naming: one function each, used by CDK and by the local run.
EVENTS_TABLE: Final = "events"
STACK_PREFIX: Final = "Streaming"


def app_name(instance: str) -> str:
    """The Spark/YARN application name; the EMR step's launcher finds the running
    version of an instance's job by it to stop it before submitting the next."""
    return f"{STACK_PREFIX.lower()}-{instance}"


def instance_id(domain: str, region: str) -> str:
    """The instance's identity everywhere: metric dimension, lease owner, logs."""
    return f"{domain}-{region}"


def stack_name(domain: str, region: str) -> str:
    """``cdk deploy Streaming-<domain>-<region>`` deploys one instance."""
    return f"{STACK_PREFIX}-{domain}-{region}"


def stream_name(domain: str, region: str) -> str:
    return f"{STACK_PREFIX.lower()}-{domain}-{region}"


def failure_topic_name(domain: str, region: str) -> str:
    return f"{STACK_PREFIX.lower()}.{domain}.{region}.failures"


def database_name(domain: str, region: str) -> str:
    """Glue/Hive database names allow only lowercase letters, digits and ``_``."""
    return f"{STACK_PREFIX.lower()}_{domain}_{region.replace('-', '_')}"


def metric_namespace(instance: str) -> str:
    """The CloudWatch namespace of one instance's metrics: the job publishes
    there, the alarms, dashboard, status and local run read there, and the job
    role may put metrics there only. ``instance`` is :func:`instance_id`."""
    return f"{METRIC_NAMESPACE_PREFIX}/{instance}"


def dimensions(
    instance: str, reason: str | None = None, key: str | None = None
) -> list[dict[str, str]]:
    """CloudWatch dimensions in the shape ``put_metric_data`` takes."""
    found = [{"Name": INSTANCE_DIMENSION, "Value": instance}]
    if reason is not None:
        found.append({"Name": REASON_DIMENSION, "Value": reason})
    if key is not None:
        found.append({"Name": KEY_DIMENSION, "Value": key})
    return found


# --------------------------------------------------------------------------- exit reasons
# Why the job (or its launcher) last stopped, as data: the job writes an exit
# record beside its lease on the way out (model/exit_record.py), so the
# supervisor (infra/supervisor/) and ``make status`` read the reason without
# parsing logs. One name per reason; the exit code alone cannot tell a
# refused configuration from a refused checkpoint, nor an operator's stop
# from a deploy's handover.
EXIT_RECORD_NAME: Final = "_exit"
EXIT_STOPPED_ON_REQUEST: Final = "stopped_on_request"
EXIT_BATCH_FAILED: Final = "batch_failed"
EXIT_CONFIG_REFUSED: Final = "config_refused"
EXIT_CHECKPOINT_REFUSED: Final = "checkpoint_refused"
EXIT_UNSUPPORTED_RELEASE: Final = "unsupported_release"
EXIT_LEASE_REFUSED: Final = "lease_refused"
EXIT_LEASE_LOST: Final = "lease_lost"
# The launcher's own exits (bootstrap/streaming-spark-submit.sh).
EXIT_HANDOVER_TIMEOUT: Final = "handover_timeout"
# What the supervisor concludes when no record explains a job that is gone:
# it was running and left no record (SIGKILL, a lost node), or it never ran.
EXIT_VANISHED: Final = "vanished"
EXIT_NEVER_STARTED: Final = "never_started"
# A restart cannot cure these: the same configuration, checkpoint or release
# would be refused again. The supervisor alarms at once and never restarts.
UNRECOVERABLE_EXITS: Final = frozenset(
    {EXIT_CONFIG_REFUSED, EXIT_CHECKPOINT_REFUSED, EXIT_UNSUPPORTED_RELEASE}
)
# Who asked for a stop (the stop marker's first word; model/graceful_stop.py):
# an operator's stop is honoured until someone starts the job again, a
# deploy's handover only until the new version should have taken the lease.
STOP_BY_OPERATOR: Final = "operator"
STOP_BY_HANDOVER: Final = "handover"

# --------------------------------------------------------------------------- the supervisor
# Published by the supervisor in the instance's namespace on every check:
# restarts in its rolling window, and 1 while it has given up (budget spent or
# an exit a restart cannot cure), which the SupervisorGaveUp alarm watches.
SUPERVISOR_RESTARTS: Final = "SupervisorRestarts"
SUPERVISOR_GAVE_UP: Final = "SupervisorGaveUp"
SUPERVISOR_STATE_NAME: Final = "supervisor.json"


def exit_record_path(checkpoint_location: str) -> str:
    """Where the job's exit record lives: beside its lease, in the checkpoint."""
    return checkpoint_location.rstrip("/") + "/" + EXIT_RECORD_NAME


def supervisor_state_path(stop_marker_path: str) -> str:
    """Where the supervisor keeps its state: beside the instance's stop marker
    (``control/<instance>/`` in the data bucket; a local run's instance directory)."""
    return stop_marker_path.rsplit("/", 1)[0] + "/" + SUPERVISOR_STATE_NAME
