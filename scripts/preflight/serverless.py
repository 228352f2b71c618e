"""Preflight of a ``"compute": "serverless"`` instance (docs/serverless.md);
an EMR instance passes both checks with a line saying they do not apply.

* **EMR Serverless concurrent vCPUs.** Every running worker of every
  application of the account and region counts against Service Quotas
  ``emr-serverless`` ``L-D05C8A75``, "Max concurrent vCPUs per account"
  (https://docs.aws.amazon.com/emr/latest/EMR-Serverless-UserGuide/endpoints-quotas.html);
  a new account's value can be as low as 16. Exceeding it does not fail the
  deploy: the run fails minutes in when it asks for a worker. The instance
  needs its driver plus its executors (the application's maximum capacity,
  infra/serverless/app.py); a handover never runs two copies (the
  old run ends before the new one starts). The other applications' maximum
  capacities are what they may take: a WARN when they and this one could
  exceed the quota together.
* **The release in the region.** The EMR Serverless API lists no release
  labels (its operations: applications, job runs, sessions). The check asks
  botocore's endpoint table whether EMR Serverless is offered in the region,
  then EMR's ``ListReleaseLabels`` there for the label
  (https://docs.aws.amazon.com/emr/latest/APIReference/API_ListReleaseLabels.html);
  ``CreateApplication`` is the last word at deploy time.
"""

from __future__ import annotations

from typing import Any, Final

import boto3

from infra.config import InstanceConfig
from model import contract
from scripts.preflight.quotas import quota_or_failure
from scripts.preflight.release_label import release_label_result
from scripts.preflight.result import Clients, Result, error_text, iam_fix

SERVERLESS_VCPUS: Final = ("emr-serverless", "L-D05C8A75")
# Applications that hold or may take capacity (API ApplicationState).
LIVE_APPLICATION_STATES: Final = (
    "CREATING",
    "CREATED",
    "STARTING",
    "STARTED",
    "STOPPING",
    "STOPPED",
)


def _not_serverless(name: str, config: InstanceConfig) -> Result | None:
    if config.compute == "serverless":
        return None
    return Result(name, True, f'{config.instance_id} runs on "compute": "{config.compute}": n/a')


def _vcpus(capacity: Any) -> int:
    """``"2 vCPU"`` (the API's capacity string) as an integer; 0 when absent."""
    number = str((capacity or {}).get("cpu", "0")).split(" ", 1)[0]
    try:
        return int(float(number))
    except ValueError:
        return 0


def other_applications_vcpus(client: Any, own_name: str) -> int:
    """The sum of the maximum capacities of the region's other applications."""
    total = 0
    paginator = client.get_paginator("list_applications")
    for page in paginator.paginate(states=list(LIVE_APPLICATION_STATES)):
        for summary in page.get("applications", []):
            if summary.get("name") == own_name:
                continue  # this instance's own application (a redeploy)
            found = client.get_application(applicationId=summary["id"])["application"]
            total += _vcpus(found.get("maximumCapacity"))
    return total


def check_serverless_vcpu_quota(config: InstanceConfig, clients: Clients) -> Result:
    name = "EMR Serverless vCPU quota"
    skipped = _not_serverless(name, config)
    if skipped is not None:
        return skipped
    needed = config.serverless.max_vcpu
    quota = quota_or_failure(name, clients, SERVERLESS_VCPUS)
    if isinstance(quota, Result):
        return quota
    try:
        others = other_applications_vcpus(
            clients["emr-serverless"], contract.app_name(config.instance_id)
        )
    except Exception as exc:
        return Result(
            name,
            False,
            f"ListApplications/GetApplication failed: {error_text(exc)}",
            iam_fix("emr-serverless:ListApplications, emr-serverless:GetApplication"),
        )
    service, code = SERVERLESS_VCPUS
    detail = (
        f"the job needs {needed} vCPUs (a driver and {config.serverless.executor_count} "
        f"executor(s)); the quota {code} is {quota}; the region's other applications may "
        f"take up to {others}"
    )
    increase = (
        f"request an increase: aws service-quotas request-service-quota-increase "
        f"--service-code {service} --quota-code {code} --desired-value {needed + others} "
        f"--region {config.region}"
    )
    if needed > quota:
        return Result(name, False, detail, increase)
    if needed + others > quota:
        return Result(
            name, True, detail, f"if they all run at once the job waits: {increase}", True
        )
    return Result(name, True, detail)


def check_serverless_release(
    config: InstanceConfig, clients: Clients, regions: tuple[str, ...] | None = None
) -> Result:
    name = "EMR Serverless release"
    skipped = _not_serverless(name, config)
    if skipped is not None:
        return skipped
    if regions is None:
        regions = tuple(boto3.session.Session().get_available_regions("emr-serverless"))
    if config.region not in regions:
        return Result(
            name,
            False,
            f"EMR Serverless is not offered in {config.region}",
            'choose a region that offers it, or "compute": "emr"',
        )
    label = config.emr.release_label
    return release_label_result(
        config,
        clients,
        name=name,
        offered=f"EMR Serverless and {label} are offered in {config.region}",
    )
