"""The checks ``python -m scripts.preflight`` runs, in the order it prints them.

Each is a function of the instance's config and the boto3 clients by service
name, returning one :class:`~scripts.preflight.result.Result`; each lives in
its own module. The CDK bootstrap check is not listed here: it needs the CDK
qualifier from cdk.json, so the command puts it first itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from infra.config import InstanceConfig
from scripts.preflight.glue_default import check_glue_default
from scripts.preflight.kinesis_source import check_kinesis_source
from scripts.preflight.lake_formation import check_lake_formation
from scripts.preflight.message_size import check_failure_message_size
from scripts.preflight.msk_cluster import check_msk_cluster
from scripts.preflight.network import check_network
from scripts.preflight.quotas import check_eip_quota, check_vcpu_quota, check_vpc_quota
from scripts.preflight.release_label import check_release_label
from scripts.preflight.result import Clients, Result
from scripts.preflight.serverless import check_serverless_release, check_serverless_vcpu_quota
from scripts.preflight.shard_bound import check_shard_bound
from scripts.preflight.shard_quota import check_shard_quota
from scripts.preflight.stack import check_deployed_record, check_left_behind
from scripts.preflight.tls import check_tls_object

Check = Callable[[InstanceConfig, Clients], Result]

CHECKS: Final[tuple[Check, ...]] = (
    check_release_label,
    check_kinesis_source,
    check_tls_object,
    check_network,
    check_msk_cluster,
    check_failure_message_size,
    check_glue_default,
    check_lake_formation,
    check_shard_quota,
    check_shard_bound,
    check_left_behind,
    check_deployed_record,
    check_vcpu_quota,
    check_vpc_quota,
    check_eip_quota,
    check_serverless_release,
    check_serverless_vcpu_quota,
)
