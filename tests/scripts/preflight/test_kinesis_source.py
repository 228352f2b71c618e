"""scripts.preflight.kinesis_source: which reader runs, and the connector warning."""

from __future__ import annotations

import io

from scripts.preflight import kinesis_source
from scripts.preflight.__main__ import run_checks
from tests.scripts.preflight.stubs import _config, _healthy_clients

# ------------------------------------------------------------------ Kinesis source


def test_the_release_default_source_passes_with_its_reason() -> None:
    result = kinesis_source.check_kinesis_source(_config(), {})
    assert result.status == "PASS"
    assert result.detail.startswith(
        "python-kinesis on emr-spark-8.1.0 (emr-spark-8.1.0's default: "
    )
    assert "not listed on this release's page" in result.detail


def test_the_connector_on_a_python_default_release_is_a_warning_that_does_not_fail() -> None:
    config = _config(job={"source": {"format": "aws-kinesis"}})
    result = kinesis_source.check_kinesis_source(config, {})
    assert result.status == "WARN" and result.ok
    assert "aws-kinesis on emr-spark-8.1.0, whose default is python-kinesis" in result.detail
    assert "Spark 4.1 build is unreleased" in result.detail
    assert "spark-sql-kinesis-connector/pull/87" in result.detail
    assert "ls /usr/share/aws/kinesis/spark-sql-kinesis/lib/ on a cluster node" in result.fix

    out = io.StringIO()
    assert run_checks(config, _healthy_clients(config), out) == 0
    text = out.getvalue()
    assert "WARN  Kinesis source: aws-kinesis on emr-spark-8.1.0" in text
    assert "\n      check: after the deploy, run ls /usr/share/aws/kinesis/" in text
    assert "preflight orders-eu-west-1: 16 passed, 1 warning(s), 0 failed" in text
