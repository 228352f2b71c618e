"""Which Kinesis reader the job will run on AWS and why (no call): a warning
when the instance chose the aws-kinesis connector on a release whose default
is not."""

from __future__ import annotations

from typing import Final

from infra.config import InstanceConfig
from infra.job_config import source_choice
from scripts.preflight.result import Clients, Result

# The awslabs connector behind format("aws-kinesis"): EMR images of release
# 7.1.0 and later include it
# (https://docs.aws.amazon.com/emr/latest/ReleaseGuide/emr-spark-structured-streaming-kinesis.html),
# but the emr-spark-8.1.0 release page does not list it
# (https://docs.aws.amazon.com/emr/latest/ReleaseGuide/emr-spark810-release.html),
# its only release (v2.0.0) is built for Spark 4.0.1, and Spark 4.1 support is
# on its main branch only (2.1.0-SNAPSHOT,
# https://github.com/awslabs/spark-sql-kinesis-connector/pull/87).
CONNECTOR_LIB_DIR: Final = "/usr/share/aws/kinesis/spark-sql-kinesis/lib/"
CONNECTOR_PR: Final = "https://github.com/awslabs/spark-sql-kinesis-connector/pull/87"


def check_kinesis_source(config: InstanceConfig, clients: Clients) -> Result:
    """Which reader the job runs on AWS, and why (:func:`infra.job_config.source_choice`).
    No call. A warning when the instance chose the connector on a release
    whose default is the Python reader: nothing here can prove the connector
    is on the release's image."""
    name = "Kinesis source"
    chosen, reason = source_choice(config)
    release = config.emr.release
    detail = f"{chosen} on {release.label} ({reason})"
    if chosen == "aws-kinesis" and release.kinesis_source != "aws-kinesis":
        return Result(
            name,
            True,
            f"aws-kinesis on {release.label}, whose default is {release.kinesis_source}: the "
            f"awslabs connector is not listed on the release page ({release.source}) and its "
            f"Spark {release.spark.rsplit('.', 1)[0]} build is unreleased (v2.0.0 is built for "
            f"Spark 4.0.1; 4.1 support is on its main branch only, {CONNECTOR_PR})",
            f"after the deploy, run ls {CONNECTOR_LIB_DIR} on a cluster node (docs/deploy.md); "
            "if it is missing or not a Spark 4.1 build, put there a jar you built from the "
            "connector's main branch, or drop job.source.format from the instance to run "
            f"{release.kinesis_source} (it reads enhanced fan-out too)",
            warn=True,
        )
    return Result(name, True, detail)


# EMR's in-transit encryption with PEM certificates loads a zip holding
# privateKey.pem and certificateChain.pem (trustedCertificates.pem optional),
# and the certificate should be a wildcard for the domain the cluster's nodes
