"""Every tuning value of the infrastructure is a field of the instance's
models (infra/config.py) that the builders read: the alarm specs, the
buckets' lifecycles, the log groups' retention and the cleanup function's
timeout follow an instance that changes them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from infra.config import InstanceConfigError, load_instances
from infra.config_sections import LOG_RETENTION_DAYS, AlarmConfig
from infra.constructs.alarms import alarm_specs
from infra.constructs.buckets import ACCESS_LOGS_BUCKET_LOGICAL_ID, ARTIFACTS_BUCKET_LOGICAL_ID
from infra.constructs.logs_key import RETENTION
from tests.infra.conftest import Synthesized, synthesize

WINDOWS = ("batch_duration", "lag", "end_to_end_latency", "failure_records")


def test_alarm_specs_are_every_alarm_with_the_configured_windows() -> None:
    config = AlarmConfig(
        lag_datapoints=2,
        lag_evaluation_periods=4,
        end_to_end_latency_datapoints=1,
        end_to_end_latency_evaluation_periods=5,
        failure_records_datapoints=2,
        failure_records_evaluation_periods=2,
        heartbeat_missing_periods=6,
    )
    specs = {spec.name: spec for spec in alarm_specs(config, trigger_interval_sec=7)}
    assert len(specs) == 8
    windows = [(name, s.datapoints, s.evaluation_periods) for name, s in specs.items()]
    assert windows == [
        ("ConsumerLag", 2, 4),
        ("SourceLag", 2, 4),
        ("FallingBehind", 3, 5),
        ("EndToEndLatency", 1, 5),
        ("SchedulingDelay", 3, 5),
        ("FailureRecords", 2, 2),
        ("HeartbeatMissing", 6, 6),
        ("SupervisorGaveUp", 1, 1),
    ]
    assert specs["FallingBehind"].threshold == 7000


def test_the_default_windows_are_the_ones_the_alarms_always_had() -> None:
    """Defaults moved out of the alarm builder, unchanged (a deployed alarm keeps its window)."""
    specs = {spec.name: spec for spec in alarm_specs(AlarmConfig(), trigger_interval_sec=10)}
    assert (specs["ConsumerLag"].datapoints, specs["ConsumerLag"].evaluation_periods) == (3, 3)
    assert (specs["EndToEndLatency"].datapoints, specs["EndToEndLatency"].evaluation_periods) == (
        2,
        3,
    )
    assert (specs["FailureRecords"].datapoints, specs["FailureRecords"].evaluation_periods) == (
        1,
        1,
    )


@pytest.mark.parametrize("window", WINDOWS)
def test_more_datapoints_than_periods_stops_synth_naming_the_field(
    window: str, example_context: dict[str, Any]
) -> None:
    context = copy.deepcopy(example_context)
    context["streaming"]["instances"][0]["alarms"] = {
        f"{window}_datapoints": 4,
        f"{window}_evaluation_periods": 3,
    }
    with pytest.raises(InstanceConfigError, match=rf"alarms\.{window}_datapoints: bad value 4"):
        load_instances(context)


def test_every_allowed_log_retention_has_its_cdk_name() -> None:
    assert tuple(sorted(RETENTION)) == LOG_RETENTION_DAYS


def test_a_log_retention_cloudwatch_does_not_offer_stops_synth(
    example_context: dict[str, Any],
) -> None:
    context = copy.deepcopy(example_context)
    context["streaming"]["instances"][0]["retention"] = {"flow_log_days": 31}
    with pytest.raises(InstanceConfigError, match=r"retention\.flow_log_days: bad value 31"):
        load_instances(context)


TUNED = {
    "retention": {
        "noncurrent_version_days": 11,
        "incomplete_upload_days": 2,
        "emr_log_days": 12,
        "access_log_days": 13,
        "flow_log_days": 14,
        "broker_log_days": 60,
        "function_log_days": 7,
    },
    "emr": {"security_group_cleanup_timeout_sec": 45},
    "alarms": {"lag_datapoints": 1, "lag_evaluation_periods": 2},
}


@pytest.fixture(scope="module")
def tuned(example_context: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    context = copy.deepcopy(example_context)
    context["streaming"]["instances"] = [{"domain": "tuned", "region": "eu-west-1", **TUNED}]
    return synthesize(context, tmp_path_factory.mktemp("cdk.out.tuned"))


@pytest.mark.synth
def test_tuning_reaches_the_template(tuned: Synthesized) -> None:
    assert tuned.error is None, tuned.error
    (name,) = tuned.templates
    resources = tuned.templates[name]["Resources"]

    def rules(logical_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = resources[logical_id]["Properties"]["LifecycleConfiguration"][
            "Rules"
        ]
        return found

    artifacts = {rule["Id"]: rule for rule in rules(ARTIFACTS_BUCKET_LOGICAL_ID)}
    assert artifacts["ExpireNoncurrentVersions"]["NoncurrentVersionExpiration"] == {
        "NoncurrentDays": 11
    }
    assert artifacts["ExpireNoncurrentVersions"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 2
    }
    assert artifacts["ExpireEmrLogs"]["ExpirationInDays"] == 12
    access = {rule["Id"]: rule for rule in rules(ACCESS_LOGS_BUCKET_LOGICAL_ID)}
    assert access["ExpireAccessLogs"]["ExpirationInDays"] == 13
    retention = {
        lid.split("Logs")[0]: r["Properties"]["RetentionInDays"]
        for lid, r in resources.items()
        if r["Type"] == "AWS::Logs::LogGroup"
    }
    assert retention["NetworkFlow"] == 14
    assert retention["FailuresBroker"] == 60
    assert retention["EmrSecurityGroupCleanup"] == 7
    (function,) = [
        r
        for r in resources.values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("Description", "").startswith("Revokes EMR-managed")
    ]
    assert function["Properties"]["Timeout"] == 45
    alarms = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        and r["Properties"]["AlarmName"].endswith(("-ConsumerLag", "-SourceLag"))
    ]
    assert [(a["DatapointsToAlarm"], a["EvaluationPeriods"]) for a in alarms] == [(1, 2)] * 2
