"""The job's JVM jar: what of the job runs as JVM code, and how Python finds it.

Two parts of the job are Java (``jvm/src``), each because the Python or SQL way
measured too slow: the de-duplication's ``StatefulProcessor`` (:mod:`app.dedup`)
and the undeclared-key functions (:mod:`app.undeclared`). ``infra.job_jar``
compiles them offline against the pinned pyspark wheel's jars into one jar. On
EMR it travels beside ``app.zip`` (``spark-submit --jars``); locally
:func:`app.spark_conf.local_conf` puts :func:`local_jar` on ``spark.jars``.

Light: no pyspark import (``infra`` reads :data:`JAR_NAME`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

JAR_NAME: Final = "streaming-job.jar"


def local_jar(root: Path | None = None) -> Path:
    """Where ``make install`` builds the jar in a checkout (git-ignored)."""
    base = root if root is not None else Path(__file__).resolve().parents[1]
    return base / "build" / "jvm" / JAR_NAME


def jvm_class(spark: object, name: str) -> Any:
    """The class ``name`` through the session's JVM gateway, or an error that
    says how to get it: py4j answers a missing class with a package object that
    fails later, obscurely."""
    from py4j.java_gateway import JavaClass

    entry = getattr(spark, "_jvm")  # noqa: B009 - py4j's gateway, not a typed attribute
    for part in name.split("."):
        entry = getattr(entry, part)
    if not isinstance(entry, JavaClass):
        raise RuntimeError(
            f"{name}: not on the Spark classpath; expected {JAR_NAME} in spark.jars "
            f"(locally: make install builds {local_jar()}; on EMR the step passes --jars)"
        )
    return entry
