"""A class missing from the job's jar is an error that names the class and the
jar and says how to build it, not py4j's package object failing later."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from job.java_classes import jvm_class
from model.jvm import JAR_NAME, local_jar


def test_a_missing_class_names_the_jar_and_how_to_build_it() -> None:
    # py4j answers an unknown name with a package object at every level.
    package = SimpleNamespace()
    package.streaming = SimpleNamespace(undeclared=SimpleNamespace(ObjectSize=package))
    with pytest.raises(RuntimeError) as raised:
        jvm_class(SimpleNamespace(_jvm=package), "streaming.undeclared.ObjectSize")
    message = str(raised.value)
    assert message.startswith("streaming.undeclared.ObjectSize: not on the Spark classpath")
    assert JAR_NAME in message
    assert str(local_jar()) in message
    assert "make install" in message
