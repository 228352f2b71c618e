"""Supported EMR release labels and the application names each one accepts.

Why a table: ``AWS::EMR::Cluster.Applications`` must name applications the
release actually ships. The emr-spark-8.x releases no longer list ``Hadoop``
as an application (YARN and HDFS come with Spark), so the fixed
``("Hadoop", "Spark")`` of the 7.x line fails cluster creation there. A label
missing from this table stops ``cdk synth`` (``infra.config``) with the list of
labels that are known, instead of failing minutes into a deploy.

Each row cites the release page its application names come from. Only
releases whose Spark matches the job's runtime belong here: the jar lock pins
Jackson to the Spark of the ``pyspark`` wheel (4.0.2, which emr-spark-8.0.0
runs), so an emr-7.x label (Spark 3.5) or a later 8.x with another Spark is
not added until the lock and the wheel move with it. To add a release: read
its page's "application versions" list, add a row with the names this job
needs, and cite the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Release:
    label: str
    applications: tuple[str, ...]
    source: str  # the release page the application names come from


RELEASES: Final[dict[str, Release]] = {
    release.label: release
    for release in (
        # "This release includes the following applications: AmazonCloudWatchAgent,
        # Delta, Hudi, Iceberg, JupyterEnterpriseGateway, Livy, and Spark."
        Release(
            "emr-spark-8.0.0",
            ("Spark",),
            "https://docs.amazonaws.cn/en_us/emr/latest/ReleaseGuide/emr-spark800-release.html",
        ),
    )
}


class UnsupportedReleaseError(ValueError):
    """A release label the bundle has no application table for."""


def supported_labels() -> tuple[str, ...]:
    return tuple(sorted(RELEASES))


def applications_for(label: str) -> tuple[str, ...]:
    """The ``Applications`` of a cluster on ``label``; raises for an unknown label."""
    release = RELEASES.get(label)
    if release is None:
        raise UnsupportedReleaseError(
            f"EMR release label {label!r} is not supported; "
            f"allowed: {', '.join(supported_labels())}"
        )
    return release.applications
