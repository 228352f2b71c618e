"""The job's JVM classes, reached through the session's py4j gateway."""

from __future__ import annotations

from typing import Any

from py4j.java_gateway import JavaClass

from model.jvm import JAR_NAME, local_jar


def jvm_class(spark: object, name: str) -> Any:
    """The class ``name`` through the session's JVM gateway, or an error that
    says how to get it: py4j answers a missing class with a package object that
    fails later, obscurely."""
    entry = getattr(spark, "_jvm")  # noqa: B009 - py4j's gateway, not a typed attribute
    for part in name.split("."):
        entry = getattr(entry, part)
    if not isinstance(entry, JavaClass):
        raise RuntimeError(
            f"{name}: not on the Spark classpath; expected {JAR_NAME} in spark.jars "
            f"(locally: make install builds {local_jar()}; on EMR the step passes --jars)"
        )
    return entry
