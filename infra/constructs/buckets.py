"""The instance's S3 buckets: data (checkpoints + warehouse), artifacts (job
code, config, EMR logs) and the server access log bucket both log into.

Prefixes are constants so the job, the step and the grants agree on them; the
job role gets each prefix it needs, never the whole bucket
(:meth:`Buckets.grant_job`, and :meth:`Buckets.grant_boot` for what the
nodes read and write while they boot).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aws_cdk import Acknowledgment, CfnResource, Duration, RemovalPolicy, Stack, Validations
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct, IConstruct, IDependable

from infra.config import InstanceConfig
from infra.config_sections import RetentionConfig
from infra.constructs.helper_lambdas import scope_auto_delete_provider
from infra.constructs.instance import removal_policy, stack_output
from infra.constructs.roles import PolicyGrantee

DATA_BUCKET_LOGICAL_ID: Final = "DataBucket"
ARTIFACTS_BUCKET_LOGICAL_ID: Final = "ArtifactsBucket"
ACCESS_LOGS_BUCKET_LOGICAL_ID: Final = "AccessLogsBucket"

CHECKPOINTS_PREFIX: Final = "checkpoints/"
WAREHOUSE_PREFIX: Final = "warehouse/"
CONTROL_PREFIX: Final = "control/"  # stop markers and the single-run lease
# The claim-check store: originals of failure records too large for the
# failure topic (model/failure_store.py). The job may only put objects here.
FAILURES_PREFIX: Final = "failures/"
ARTIFACTS_PREFIX: Final = "artifacts/"
EMR_LOGS_PREFIX: Final = "emr-logs/"

# Prefixes of the data bucket the job reads and writes (Spark checkpoints,
# table files, stop markers and the lease).
JOB_DATA_PREFIXES: Final = (CHECKPOINTS_PREFIX, WAREHOUSE_PREFIX, CONTROL_PREFIX)
# What the job does with objects under its data prefixes: read, write, delete
# (checkpoint renames are copy + delete, table cleanup), and abort or list the
# parts of a multipart upload of a large file. No object version is ever read
# or deleted (``s3:*ObjectVersion*``): a version deleted would be gone for
# good, which the bucket's versioning exists to prevent.
JOB_OBJECT_ACTIONS: Final = (
    "s3:GetObject",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:AbortMultipartUpload",
    "s3:ListMultipartUploadParts",
)


def listing_prefixes(prefixes: tuple[str, ...]) -> list[str]:
    """``s3:prefix`` values (StringLike) that let a principal list under
    ``prefixes`` and nowhere else in the bucket: each prefix itself, its
    name without the slash (a directory probe) and anything below it.

    S3 also evaluates this condition, with the object's key as ``s3:prefix``,
    when it decides between 404 and 403 for a GET or HEAD of a missing object
    (so the lease's and stop marker's "not there" stay 404 under these
    prefixes): ListBucket is what lets a caller learn that a key does not
    exist (https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html,
    "Permissions"); Ceph's S3 gateway copied the prefix behaviour from AWS
    (https://github.com/ceph/ceph/pull/68577)."""
    found: list[str] = []
    for prefix in prefixes:
        found += [prefix.rstrip("/"), f"{prefix}*"]
    return found


@dataclass(frozen=True)
class BucketsProps:
    """``instance_id`` names the job's places in the data bucket; ``retention``
    says how long old versions and logs are kept."""

    removal_policy: RemovalPolicy
    instance_id: str
    retention: RetentionConfig

    @classmethod
    def of(cls, instance: InstanceConfig) -> BucketsProps:
        return cls(removal_policy(instance), instance.instance_id, instance.retention)


def _drop_redundant_provider_dependency(stack: Stack) -> None:
    """CDK's auto-delete handler both references its role (GetAtt) and depends on
    it; cfn-lint reports the redundant DependsOn (W3005). The GetAtt keeps the order."""
    provider = stack.node.try_find_child("Custom::S3AutoDeleteObjectsCustomResourceProvider")
    handler = provider.node.try_find_child("Handler") if provider is not None else None
    if isinstance(handler, CfnResource):
        handler.add_deletion_override("DependsOn")


def _pin(bucket: s3.Bucket, logical_id: str) -> None:
    cfn = bucket.node.default_child
    if isinstance(cfn, s3.CfnBucket):
        cfn.override_logical_id(logical_id)


class Buckets(Construct):
    """Exposes ``data``, ``artifacts``, ``access_logs``, ``emr_log_uri`` (where
    the cluster writes its logs) and the job's places in the data bucket:
    ``checkpoint_location``, ``stop_marker_path``, ``failure_store_location``
    and :meth:`database_prefix`; :meth:`grant_job` gives the job its prefixes.
    Outputs ``DataBucketName`` and ``ArtifactsBucketName``."""

    def __init__(self, scope: Construct, construct_id: str, *, props: BucketsProps) -> None:
        super().__init__(scope, construct_id)
        # DESTROY must delete cleanly: CloudFormation cannot delete a bucket that
        # still holds objects (or object versions), so CDK's auto-delete custom
        # resource empties every version first. Never for RETAIN: that would
        # delete the data the policy keeps.
        destroy = props.removal_policy == RemovalPolicy.DESTROY
        retention = props.retention
        # Every bucket is versioned: an overwritten or deleted object can be
        # recovered for retention.noncurrent_version_days.
        common: dict[str, object] = {
            "versioned": True,
            "encryption": s3.BucketEncryption.S3_MANAGED,
            "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "enforce_ssl": True,
            "removal_policy": props.removal_policy,
            "auto_delete_objects": destroy,
            "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        }
        noncurrent = s3.LifecycleRule(
            id="ExpireNoncurrentVersions",
            noncurrent_version_expiration=Duration.days(retention.noncurrent_version_days),
            abort_incomplete_multipart_upload_after=Duration.days(retention.incomplete_upload_days),
        )
        # Server access logs cannot be delivered to an SSE-KMS bucket: SSE-S3 here.
        # Delivery is granted by bucket policy (cdk.json feature flag
        # serverAccessLogsUseBucketPolicy), not by the legacy log-delivery ACL.
        # Versioned like the others: the audit trail of the buckets.
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireAccessLogs", expiration=Duration.days(retention.access_log_days)
                ),
                noncurrent,
            ],
            **common,  # type: ignore[arg-type]
        )
        _pin(self.access_logs, ACCESS_LOGS_BUCKET_LOGICAL_ID)
        Validations.of(self.access_logs).acknowledge(
            Acknowledgment(
                id="AwsSolutions-S1",
                reason="This is the access-log target bucket; logging it into itself would "
                f"loop, and its objects expire after {retention.access_log_days} days.",
            )
        )

        def logged(
            construct_id: str, logical_id: str, logs_prefix: str, rules: list[s3.LifecycleRule]
        ) -> s3.Bucket:
            """A bucket whose server access logs go to ``access_logs`` under ``logs_prefix``."""
            bucket = s3.Bucket(
                self,
                construct_id,
                server_access_logs_bucket=self.access_logs,
                server_access_logs_prefix=logs_prefix,
                lifecycle_rules=rules,
                **common,  # type: ignore[arg-type]
            )
            _pin(bucket, logical_id)
            return bucket

        self.data = logged("Data", DATA_BUCKET_LOGICAL_ID, "data/", [noncurrent])
        emr_logs = s3.LifecycleRule(
            id="ExpireEmrLogs",
            prefix=EMR_LOGS_PREFIX,
            expiration=Duration.days(retention.emr_log_days),
        )
        self.artifacts = logged(
            "Artifacts", ARTIFACTS_BUCKET_LOGICAL_ID, "artifacts/", [noncurrent, emr_logs]
        )

        self.emr_log_uri = self.artifacts.s3_url_for_object(EMR_LOGS_PREFIX)
        instance = props.instance_id
        self.checkpoint_location = self.data.s3_url_for_object(f"{CHECKPOINTS_PREFIX}{instance}/")
        self.stop_marker_path = self.data.s3_url_for_object(f"{CONTROL_PREFIX}{instance}/stop")
        self.failure_store_location = self.data.s3_url_for_object(f"{FAILURES_PREFIX}{instance}/")
        stack_output(self, "DataBucketName", self.data.bucket_name)
        stack_output(self, "ArtifactsBucketName", self.artifacts.bucket_name)
        # The auto-delete custom resources (DESTROY only): whatever writes to the
        # buckets (the cluster) must depend on them, so it is gone before they run.
        self.emptied_on_delete: list[IDependable] = [
            child
            for bucket in (self.access_logs, self.data, self.artifacts)
            if (child := bucket.node.try_find_child("AutoDeleteObjectsCustomResource")) is not None
        ]
        if destroy:
            _drop_redundant_provider_dependency(Stack.of(self))
            # CDK's provider: a role for its own log group only, the group kept
            # a month; each emptying waits for the group, so the group is
            # deleted after the provider's last run.
            logs_group = scope_auto_delete_provider(
                Stack.of(self), props.removal_policy, log_days=retention.function_log_days
            )
            if logs_group is not None:
                for emptying in self.emptied_on_delete:
                    emptying.node.add_dependency(logs_group)  # type: ignore[attr-defined]

    @staticmethod
    def database_prefix(database_name: str) -> str:
        """Where a Glue database of the data bucket keeps its tables."""
        return f"{WAREHOUSE_PREFIX}{database_name}.db/"

    def database_location(self, database_name: str) -> str:
        """The database's location URI (the Glue database's and the job's)."""
        return self.data.s3_url_for_object(self.database_prefix(database_name))

    def grant_job(self, role: iam.IRole) -> None:
        """Read/write the job's data prefixes: each a prefix of this instance's
        own data bucket, never the whole bucket, and list only under them.
        (Its code, config and logs are :meth:`grant_boot`'s.)

        Written out rather than ``grant_read_write``: that grant also
        carries ``s3:DeleteObjectVersion`` (``s3:DeleteObject*``), object ACL,
        retention and legal-hold writes, and ``s3:List*`` on the whole bucket."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="JobDataObjects",
                actions=list(JOB_OBJECT_ACTIONS),
                resources=[self.data.arn_for_objects(f"{p}*") for p in JOB_DATA_PREFIXES],
            )
        )
        self._listing(role, "JobDataListing", self.data, JOB_DATA_PREFIXES)
        for prefix in JOB_DATA_PREFIXES:
            self._acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::<{DATA_BUCKET_LOGICAL_ID}.Arn>/{prefix}*]",
                f"Spark writes objects with generated names under {prefix} of this "
                "instance's own data bucket; the wildcard is bounded by that prefix.",
            )
        self.grant_claim_check(role)

    def grant_claim_check(self, role: iam.IRole) -> None:
        """``s3:PutObject`` under ``failures/`` of this data bucket, and nothing
        else there: the executors write a failure record's original before its
        pointer goes to Kafka (model/failure_store.py); reading it back is
        the operator's (docs/operate.md). A hand-written statement, not
        ``grant_put``: that grant adds the legal-hold, retention and tagging
        writes too. The bucket is SSE-S3 (no KMS key to grant). PutObject is the
        object-level action and takes an object ARN
        (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html)."""
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ClaimCheckPut",
                actions=["s3:PutObject"],
                resources=[self.data.arn_for_objects(f"{FAILURES_PREFIX}*")],
            )
        )
        self._acknowledge(
            role,
            f"AwsSolutions-IAM5[Resource::<{DATA_BUCKET_LOGICAL_ID}.Arn>/{FAILURES_PREFIX}*]",
            "The job puts each claim-checked failure record under failures/ of this "
            "instance's own data bucket, named by its stream coordinates; PutObject only.",
        )

    def grant_boot(self, boot: PolicyGrantee) -> None:
        """What the nodes need from the artifacts bucket from their first
        boot on: read ``artifacts/`` (the bootstrap scripts and locks, then the
        job's code and config the step names) and push logs under
        ``emr-logs/``. Granted to the job role's boot policy, which the cluster
        waits for (infra/constructs/roles.py). Written out rather than
        ``grant_read``/``grant_put``, whose ``s3:List*`` covers the whole bucket."""
        boot.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadArtifacts",
                actions=["s3:GetObject"],
                resources=[self.artifacts.arn_for_objects(f"{ARTIFACTS_PREFIX}*")],
            )
        )
        self._listing(boot, "ListArtifacts", self.artifacts, (ARTIFACTS_PREFIX,))
        self._acknowledge(
            boot.policy,
            f"AwsSolutions-IAM5[Resource::<{ARTIFACTS_BUCKET_LOGICAL_ID}.Arn>/{ARTIFACTS_PREFIX}*]",
            "The nodes read the bootstrap scripts and the job's code and config under "
            "artifacts/ of this instance's own artifacts bucket; names carry content hashes.",
        )
        boot.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PushEmrLogs",
                actions=["s3:PutObject", "s3:AbortMultipartUpload"],
                resources=[self.artifacts.arn_for_objects(f"{EMR_LOGS_PREFIX}*")],
            )
        )
        self._acknowledge(
            boot.policy,
            f"AwsSolutions-IAM5[Resource::<{ARTIFACTS_BUCKET_LOGICAL_ID}.Arn>/{EMR_LOGS_PREFIX}*]",
            "EMR nodes push container and step logs with generated names under emr-logs/.",
        )

    @staticmethod
    def _listing(
        grantee: iam.IGrantable, sid: str, bucket: s3.IBucket, prefixes: tuple[str, ...]
    ) -> None:
        """``s3:ListBucket`` on ``bucket`` under ``prefixes`` only (a bucket
        action whose condition key is ``s3:prefix``,
        https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html),
        and the bucket's region lookup (EMRFS and other S3 clients ask for it;
        it names no object), in a statement of its own: a request without a
        prefix would fail the condition."""
        principal = grantee.grant_principal
        principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid=sid,
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": listing_prefixes(prefixes)}},
            )
        )
        principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid=f"{sid}Location",
                actions=["s3:GetBucketLocation"],
                resources=[bucket.bucket_arn],
            )
        )

    @staticmethod
    def _acknowledge(target: IConstruct, finding: str, reason: str) -> None:
        """On the role or policy that holds the grant: cdk-nag raises these on
        the policy, not on the buckets."""
        Validations.of(target).acknowledge(Acknowledgment(id=finding, reason=reason))
