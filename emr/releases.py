"""The EMR release labels the bundle knows, and the one Spark the job is built for.

Why a table: a release label decides what runs on the cluster, and three of its
facts must agree with this repository or a deploy fails minutes (or days) in:

* ``AWS::EMR::Cluster.Applications`` must name applications the release ships.
  The emr-spark-8.x releases list no ``Hadoop`` (YARN and HDFS come with Spark),
  so the 7.x line's ``("Hadoop", "Spark")`` fails cluster creation there.
* The release's Spark must be the Spark the job is tested on: the jar lock
  (``bootstrap/jars.lock``) pins Jackson to the version inside the pinned
  ``pyspark`` wheel, and the job's code follows that Spark's behaviour (the 4.1
  migration items in docs/job.md). :data:`JOB_SPARK_VERSION` is that Spark.
* The job's Python must be one the release ships; the bootstrap installs the
  locked packages for that interpreter.

A label missing from the table stops ``cdk synth`` (``infra.config``) with the
labels that are known; a known label whose Spark is not :data:`JOB_SPARK_VERSION`
stops it too, naming the supported labels, instead of failing minutes into a
deploy. To add a release: read its page's application and Python lists, add a
row, and cite the page; moving to another Spark moves the wheel pin, the jar
lock and :data:`JOB_SPARK_VERSION` together (docs/deploy.md, "Moving to another
EMR release").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

# The Spark the job is built and tested on: the ``pyspark`` pin of
# requirements-dev.txt (tests/deploy/test_platform.py holds the three equal).
JOB_SPARK_VERSION: Final = "4.1.1"
# The release an instance runs when ``emr.release_label`` names none: the LTS one.
DEFAULT_RELEASE_LABEL: Final = "emr-spark-8.1.0"
# The interpreter the job runs on EMR Serverless (``PYSPARK_PYTHON``), the
# default of the one setting ``serverless.python`` (infra/serverless/config.py).
# Verified: the emr-spark-8.1.0 page lists Python 3.11
# (https://docs.aws.amazon.com/emr/latest/ReleaseGuide/emr-spark810-release.html),
# the version the dependency archive is built for. NOT verified: the path. It
# is where the release's EMR (on EC2) nodes have 3.11 (:data:`RELEASES`); no
# page found gives the interpreter paths in the Serverless image
# (docs/serverless.md, "The interpreter: what is verified"), so it is a setting.
SERVERLESS_PYTHON: Final = "/usr/bin/python3.11"

KinesisSource = Literal["python-kinesis", "aws-kinesis"]

# Where Amazon EMR (on EC2) exists: the Regions of its service-endpoint table,
# https://docs.aws.amazon.com/general/latest/gr/emr.html ("Amazon EMR endpoints
# and quotas"), as botocore 1.44.8's endpoint data lists them for ``emr`` in
# the aws, aws-cn and aws-us-gov partitions. A region not
# listed stops synth naming the field ``region`` (infra.config). A release
# page that limits its Regions gives its :attr:`Release.regions` a subset.
EMR_REGIONS_PAGE: Final = "https://docs.aws.amazon.com/general/latest/gr/emr.html"
EMR_REGIONS: Final = (
    "af-south-1",
    "ap-east-1",
    "ap-east-2",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-south-1",
    "ap-south-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "ap-southeast-6",
    "ap-southeast-7",
    "ca-central-1",
    "ca-west-1",
    "cn-north-1",
    "cn-northwest-1",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "il-central-1",
    "me-central-1",
    "me-south-1",
    "mx-central-1",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-gov-east-1",
    "us-gov-west-1",
    "us-west-1",
    "us-west-2",
)


@dataclass(frozen=True)
class Release:
    label: str
    # Upstream Spark version (the release page's "4.1.1-amzn-0" less its suffix).
    spark: str
    applications: tuple[str, ...]
    # Interpreters the release page lists, as paths on the nodes (AL2023 ships
    # each one as /usr/bin/pythonX.Y); the first is the job's default.
    pythons: tuple[str, ...]
    # The Kinesis source the job uses on this release when the instance does
    # not choose one, and why (``make preflight`` and the job's start print it).
    kinesis_source: KinesisSource
    source_reason: str
    source: str  # the release page the facts come from
    # Regions the release can be launched in (its page names no restriction:
    # every Region EMR runs in, :data:`EMR_REGIONS`).
    regions: tuple[str, ...] = EMR_REGIONS

    @property
    def supported(self) -> bool:
        """The job runs here only if the release's Spark is the job's."""
        return self.spark == JOB_SPARK_VERSION


_PYTHON_SOURCE_REASON: Final = (
    "the awslabs aws-kinesis connector is not listed on this release's page and its "
    "Spark 4.1 build is unreleased (awslabs/spark-sql-kinesis-connector PR #87), so the "
    "job's own python-kinesis reader is the default: executors read the shards (boto3 "
    "GetRecords polling, or enhanced fan-out through SubscribeToShard with "
    "job.source.consumer_type; tested here); "
    "job.source.format aws-kinesis runs the connector only from a jar you build from its "
    "main branch (docs/deploy.md)"
)

RELEASES: Final[dict[str, Release]] = {
    release.label: release
    for release in (
        # "Applications: AmazonCloudWatchAgent, Delta, Hudi, Iceberg,
        # JupyterEnterpriseGateway, Livy, and Spark"; Spark 4.1.1-amzn-0;
        # Python 3.11 and 3.13; LTS, supported until 2029-09-07.
        Release(
            label="emr-spark-8.1.0",
            spark="4.1.1",
            applications=("Spark",),
            pythons=("/usr/bin/python3.11", "/usr/bin/python3.13"),
            kinesis_source="python-kinesis",
            source_reason=_PYTHON_SOURCE_REASON,
            source="https://docs.aws.amazon.com/emr/latest/ReleaseGuide/emr-spark810-release.html",
        ),
        # Kept so that a stack pinned to it gets a clear refusal rather than
        # "unknown label": its Spark (4.0.2, Jackson 2.18.2) is not the job's.
        Release(
            label="emr-spark-8.0.0",
            spark="4.0.2",
            applications=("Spark",),
            pythons=("/usr/bin/python3.11", "/usr/bin/python3.12", "/usr/bin/python3.13"),
            kinesis_source="python-kinesis",
            source_reason=_PYTHON_SOURCE_REASON,
            source="https://docs.amazonaws.cn/en_us/emr/latest/ReleaseGuide/emr-spark800-release.html",
        ),
    )
}


class UnsupportedReleaseError(ValueError):
    """A release label the bundle cannot deploy the job on."""


def supported_labels() -> tuple[str, ...]:
    """Labels whose Spark is the job's, newest first."""
    return tuple(sorted((r.label for r in RELEASES.values() if r.supported), reverse=True))


def release_for(label: str) -> Release:
    """The release of ``label``; raises naming the supported labels when the
    label is unknown or runs another Spark than the job's."""
    release = RELEASES.get(label)
    allowed = f"allowed: {', '.join(supported_labels())}"
    if release is None:
        raise UnsupportedReleaseError(f"EMR release label {label!r} is not supported; {allowed}")
    if not release.supported:
        raise UnsupportedReleaseError(
            f"EMR release label {label!r} runs Spark {release.spark}, but the job is built "
            f"and tested on Spark {JOB_SPARK_VERSION} (pyspark pin, Jackson jar lock); "
            f"{allowed}"
        )
    return release


def known_regions() -> tuple[str, ...]:
    """Every Region one of the supported releases exists in, sorted."""
    return tuple(sorted({region for r in RELEASES.values() if r.supported for region in r.regions}))
