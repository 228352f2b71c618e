"""The instance's S3 buckets: data (checkpoints + warehouse), artifacts (job
code, config, EMR logs) and the server access log bucket both log into.

Prefixes are constants so the job, the step and the grants agree on them; the
job role gets each prefix it needs, never the whole bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_s3 as s3
from constructs import Construct

DATA_BUCKET_LOGICAL_ID: Final = "DataBucket"
ARTIFACTS_BUCKET_LOGICAL_ID: Final = "ArtifactsBucket"
ACCESS_LOGS_BUCKET_LOGICAL_ID: Final = "AccessLogsBucket"

CHECKPOINTS_PREFIX: Final = "checkpoints/"
WAREHOUSE_PREFIX: Final = "warehouse/"
CONTROL_PREFIX: Final = "control/"  # stop markers and the single-run lease
ARTIFACTS_PREFIX: Final = "artifacts/"
EMR_LOGS_PREFIX: Final = "emr-logs/"

NONCURRENT_VERSION_DAYS: Final = 30
EMR_LOG_DAYS: Final = 30
ACCESS_LOG_DAYS: Final = 90


@dataclass(frozen=True)
class BucketsProps:
    removal_policy: RemovalPolicy


def _pin(bucket: s3.Bucket, logical_id: str) -> None:
    cfn = bucket.node.default_child
    if isinstance(cfn, s3.CfnBucket):
        cfn.override_logical_id(logical_id)


class Buckets(Construct):
    """Exposes ``data``, ``artifacts``, ``access_logs`` and the S3 URIs built on them."""

    def __init__(self, scope: Construct, construct_id: str, *, props: BucketsProps) -> None:
        super().__init__(scope, construct_id)
        common: dict[str, object] = {
            "encryption": s3.BucketEncryption.S3_MANAGED,
            "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "enforce_ssl": True,
            "removal_policy": props.removal_policy,
            "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        }
        noncurrent = s3.LifecycleRule(
            id="ExpireNoncurrentVersions",
            noncurrent_version_expiration=Duration.days(NONCURRENT_VERSION_DAYS),
            abort_incomplete_multipart_upload_after=Duration.days(7),
        )
        # Server access logs cannot be delivered to an SSE-KMS bucket: SSE-S3 here.
        # Delivery is granted by bucket policy (cdk.json feature flag
        # serverAccessLogsUseBucketPolicy), not by the legacy log-delivery ACL.
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            lifecycle_rules=[
                s3.LifecycleRule(id="ExpireAccessLogs", expiration=Duration.days(ACCESS_LOG_DAYS))
            ],
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            removal_policy=props.removal_policy,
        )
        _pin(self.access_logs, ACCESS_LOGS_BUCKET_LOGICAL_ID)
        Validations.of(self.access_logs).acknowledge(
            Acknowledgment(
                id="AwsSolutions-S1",
                reason="This is the access-log target bucket; logging it into itself would "
                "loop, and its objects expire after 90 days.",
            )
        )
        self.data = s3.Bucket(
            self,
            "Data",
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="data/",
            lifecycle_rules=[noncurrent],
            **common,  # type: ignore[arg-type]
        )
        _pin(self.data, DATA_BUCKET_LOGICAL_ID)
        self.artifacts = s3.Bucket(
            self,
            "Artifacts",
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="artifacts/",
            lifecycle_rules=[
                noncurrent,
                s3.LifecycleRule(
                    id="ExpireEmrLogs",
                    prefix=EMR_LOGS_PREFIX,
                    expiration=Duration.days(EMR_LOG_DAYS),
                ),
            ],
            **common,  # type: ignore[arg-type]
        )
        _pin(self.artifacts, ARTIFACTS_BUCKET_LOGICAL_ID)

        self.checkpoint_uri = self.data.s3_url_for_object(CHECKPOINTS_PREFIX)
        self.warehouse_uri = self.data.s3_url_for_object(WAREHOUSE_PREFIX)
        self.control_uri = self.data.s3_url_for_object(CONTROL_PREFIX)
        self.artifacts_uri = self.artifacts.s3_url_for_object(ARTIFACTS_PREFIX)
        self.emr_log_uri = self.artifacts.s3_url_for_object(EMR_LOGS_PREFIX)
