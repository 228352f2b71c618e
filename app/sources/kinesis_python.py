"""Python Data Source for Kinesis (work in progress: interface only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT_NAME: Final = "python-kinesis"


def register(spark: SparkSession) -> None:
    """Make ``format("python-kinesis")`` resolvable in ``spark``."""
    raise NotImplementedError("python-kinesis source is being built")
