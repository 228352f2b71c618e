"""The job's JVM jar: what of the job runs as JVM code, and how Python finds it.

Two parts of the job are Java (``jvm/src``), each because the Python or SQL way
measured too slow: the de-duplication's ``StatefulProcessor`` (:mod:`job.dedup`)
and the undeclared-key functions (:mod:`job.undeclared`). ``artifacts.job_jar``
compiles them offline against the pinned pyspark wheel's jars into one jar. On
EMR it travels beside ``app.zip`` (``spark-submit --jars``); locally
:func:`model.spark_conf.local_conf` puts :func:`local_jar` on ``spark.jars``.

The names only, for ``infra`` and the job alike; :func:`job.java_classes.jvm_class`
reaches the classes through a session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

JAR_NAME: Final = "streaming-job.jar"


def local_jar(root: Path | None = None) -> Path:
    """Where ``make install`` builds the jar in a checkout (git-ignored)."""
    base = root if root is not None else Path(__file__).resolve().parents[1]
    return base / "build" / "jvm" / JAR_NAME
