"""Builds the SparkSession from the single Spark-conf source (model.spark_conf)."""

from __future__ import annotations

from pyspark.sql import SparkSession


def build_session(conf: dict[str, str], app_name: str) -> SparkSession:
    """A Hive-enabled session; ``conf`` is ``streaming_conf``/``local_conf`` output.

    On EMR the cluster's spark-defaults already hold the same values; setting
    them again here is harmless and keeps ``python -m job`` self-sufficient.
    """
    builder = SparkSession.builder.appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.enableHiveSupport().getOrCreate()
