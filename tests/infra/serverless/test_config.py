"""``"compute"`` and the ``serverless`` section (infra/serverless/config.py):
validated like every other field, and a serverless instance asks for no TLS
zip and no emr values."""

from __future__ import annotations

from typing import Any

import pytest

from emr.releases import SERVERLESS_PYTHON
from infra.config import (
    PLACEHOLDER_TLS_URI,
    InstanceConfig,
    InstanceConfigError,
    load_instances,
    read_cdk_context,
)
from infra.config_sections import LOG_RETENTION_DAYS
from infra.serverless.config import (
    NO_TLS_ON_SERVERLESS,
    SERVERLESS_LOG_RETENTION_DAYS,
    WorkerConfig,
    spark_memory_mb,
)
from infra.serverless.job_run import application_spark_defaults
from local.serverless_launch import job_run
from tests.infra.conftest import DECLARED_CDK_JSON


def _load(**entry: Any) -> InstanceConfig:
    context = {"streaming": {"instances": [{"domain": "orders", "region": "us-east-1", **entry}]}}
    (config,) = load_instances(context)
    return config


def _error(**entry: Any) -> str:
    with pytest.raises(InstanceConfigError) as caught:
        _load(**entry)
    return str(caught.value)


def test_compute_defaults_to_emr_and_emr_still_needs_its_tls_zip() -> None:
    message = _error()
    assert "field emr.tls_certificates_s3_uri: missing required field" in message
    config = _load(emr={"tls_certificates_s3_uri": "s3://certs-bucket/a.zip"})
    assert config.compute == "emr"


def test_an_unknown_compute_is_named_with_what_is_allowed() -> None:
    message = _error(compute="lambda", emr={"tls_certificates_s3_uri": "s3://b-b/a.zip"})
    assert "instance instances[0] (orders/us-east-1): field compute: bad value 'lambda'" in message
    assert "allowed: emr | serverless" in message


def test_a_serverless_instance_needs_no_tls_zip_and_no_emr_section() -> None:
    config = _load(compute="serverless")
    assert config.compute == "serverless"
    assert config.emr.tls_certificates_s3_uri == NO_TLS_ON_SERVERLESS
    assert not config.emr.tls_is_placeholder  # synth for deploy does not refuse it


def test_a_serverless_instance_drops_the_examples_placeholder_but_keeps_a_real_zip() -> None:
    placeholder = _load(compute="serverless", emr={"tls_certificates_s3_uri": PLACEHOLDER_TLS_URI})
    assert placeholder.emr.tls_certificates_s3_uri == NO_TLS_ON_SERVERLESS
    real = _load(compute="serverless", emr={"tls_certificates_s3_uri": "s3://certs-b/a.zip"})
    assert real.emr.tls_certificates_s3_uri == "s3://certs-b/a.zip"


def test_the_default_shape_is_the_priced_one() -> None:
    shape = _load(compute="serverless").serverless
    assert shape.architecture == "ARM64"
    assert (shape.driver.cpu, shape.driver.memory_gb, shape.driver.disk_gb) == (1, 2, 20)
    assert (shape.driver.spark_memory_mb, shape.driver.overhead_mb) == (1024, 1024)
    assert (shape.executor.cpu, shape.executor.memory_gb) == (1, 2)
    assert (shape.executor.spark_memory_mb, shape.executor.overhead_mb) == (1024, 1024)
    assert shape.executor_count == 1
    assert (shape.max_vcpu, shape.max_memory_gb, shape.max_disk_gb) == (2, 4, 40)


@pytest.mark.parametrize(
    ("serverless", "field", "allowed"),
    [
        ({"driver": {"cpu": 3}}, "serverless.driver.cpu", "1, 2, 4, 8, 16"),
        (
            {"executor": {"cpu": 1, "memory_gb": 9}},
            "serverless.executor.memory_gb",
            "2-8 GB in steps of 1 GB for a 1 vCPU worker",
        ),
        (
            {"executor": {"cpu": 8, "memory_gb": 18}},
            "serverless.executor.memory_gb",
            "16-60 GB in steps of 4 GB for a 8 vCPU worker",
        ),
        ({"driver": {"disk_gb": 10}}, "serverless.driver.disk_gb", "an integer >= 20 and <= 200"),
        ({"executor_count": 0}, "serverless.executor_count", "an integer >= 1"),
        ({"driver": {"overhead_mb": 100}}, "serverless.driver.overhead_mb", "an integer >= 384"),
        (
            {"executor": {"memory_gb": 2, "overhead_mb": 1500}},
            "serverless.executor.overhead_mb",
            "at most 1024 MB on a 2 GB worker (it must leave a heap of at least 1024 MB)",
        ),
        ({"architecture": "ARM"}, "serverless.architecture", "ARM64 | X86_64"),
        ({"log_retention_days": 5}, "serverless.log_retention_days", "7, 14, 30"),
        ({"python": "/usr/bin/python3.12"}, "serverless.python", "python3.11 interpreter"),
        ({"python": "python3.11"}, "serverless.python", "an absolute path"),
    ],
)
def test_a_bad_serverless_value_names_the_field_and_what_is_allowed(
    serverless: dict[str, Any], field: str, allowed: str
) -> None:
    message = _error(compute="serverless", serverless=serverless)
    assert f"field {field}: " in message
    assert allowed in message


def test_spark_memory_leaves_the_overhead_inside_the_worker() -> None:
    # 10 % overhead, at least 384 MB (EMR Serverless app-behavior page).
    assert spark_memory_mb(2) == 1664  # 2048 - 384
    assert spark_memory_mb(8) == 7424  # 8192 / 1.1 = 7447, floored to 128
    for gb in range(2, 121):
        memory = spark_memory_mb(gb)
        assert memory + max(384, memory * 0.10) <= gb * 1024
    assert WorkerConfig(cpu=2, memory_gb=4).spark_memory_mb == spark_memory_mb(4)


def test_an_explicit_overhead_leaves_the_rest_of_the_worker_to_the_heap() -> None:
    assert WorkerConfig(memory_gb=4, overhead_mb=1000).spark_memory_mb == 3072  # 3096 floored
    assert WorkerConfig(memory_gb=2, overhead_mb=None).spark_memory_mb == spark_memory_mb(2)


def test_the_shipped_example_runs_its_small_instances_on_serverless_and_the_heavy_on_emr() -> None:
    declared = {c.instance_id: c for c in load_instances(read_cdk_context(DECLARED_CDK_JSON))}
    if set(declared) != {"orders-ap-northeast-2", "payments-ap-northeast-2", "orders-eu-west-1"}:
        pytest.skip("cdk.json declares the user's own instances, not the shipped example")
    assert declared["orders-ap-northeast-2"].compute == "emr"
    assert declared["payments-ap-northeast-2"].compute == "serverless"
    assert declared["orders-eu-west-1"].compute == "serverless"
    assert {c.size for c in declared.values() if c.compute == "serverless"} == {"small"}


def test_a_restart_budget_of_one_cannot_be_split_with_the_service() -> None:
    message = _error(compute="serverless", supervisor={"max_restarts_per_hour": 1})
    assert "instances[0] (orders/us-east-1): field supervisor.max_restarts_per_hour: " in message
    assert 'bad value 1; allowed: >= 2 on "compute": "serverless"' in message
    assert _load(
        supervisor={"max_restarts_per_hour": 1}, emr={"tls_certificates_s3_uri": "s3://b-b/a.zip"}
    )


def test_the_serverless_log_retentions_are_the_instances() -> None:
    assert SERVERLESS_LOG_RETENTION_DAYS == LOG_RETENTION_DAYS


def test_a_serverless_instance_keeps_the_shuffle_partitions_it_was_created_with() -> None:
    """Structured Streaming refuses a new ``spark.sql.shuffle.partitions`` for an
    existing checkpoint: a serverless shape's cores set the count at creation,
    the ``deployed`` record keeps it through a later change of shape."""
    created = _load(compute="serverless", serverless={"executor_count": 2})
    assert created.shuffle_partitions == 2
    resized = _load(
        compute="serverless",
        serverless={"executor_count": 3, "executor": {"cpu": 2, "memory_gb": 8}},
        deployed={"shuffle_partitions": 2},
    )
    assert resized.shuffle_partitions == 2
    defaults = application_spark_defaults(resized.serverless, resized.shuffle_partitions)
    assert defaults["spark.sql.shuffle.partitions"] == "2"
    assert defaults["spark.executor.instances"] == "3"
    # Without the fixed count, the shape's cores would have set it.
    assert application_spark_defaults(resized.serverless)["spark.sql.shuffle.partitions"] == "6"


def test_the_interpreter_is_one_setting_with_the_cited_default() -> None:
    """``serverless.python`` reaches both PYSPARK_PYTHONs of the request; its
    default is emr/releases.py's SERVERLESS_PYTHON (cited there, its path
    unverified: docs/serverless.md)."""

    default = _load(compute="serverless")
    assert default.serverless.python == SERVERLESS_PYTHON == "/usr/bin/python3.11"
    chosen = _load(compute="serverless", serverless={"python": "/opt/py/bin/python3.11"})
    request = job_run(chosen, "s3://b/pkg", "s3://b/deps.tar.gz")
    parameters = request["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"]
    assert "spark.emr-serverless.driverEnv.PYSPARK_PYTHON=/opt/py/bin/python3.11" in parameters
    assert "spark.executorEnv.PYSPARK_PYTHON=/opt/py/bin/python3.11" in parameters
    assert "/usr/bin/python3.11" not in parameters
