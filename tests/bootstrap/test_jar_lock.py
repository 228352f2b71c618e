"""The jar lock cannot ship the Jackson runtime failure (docs/design.md, "Incidents").

Every Jackson artifact in the lock has one version, that version is the one the
pinned pyspark wheel bundles, and every checksum that can be recomputed here
(from the wheel's own copy of the jar) matches.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pyspark
import pytest

from infra.emr_step import LockedJar, parse_jar_lock, read_jar_lock

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "bootstrap" / "jars.lock"
WHEEL_JARS = Path(pyspark.__file__).parent / "jars"
JACKSON_GROUP = "com.fasterxml.jackson"
REQUIRED = {
    "jackson-core",
    "jackson-databind",
    "jackson-annotations",
    "jackson-datatype-jsr310",
    "jackson-dataformat-cbor",
}


def wheel_version(artifact: str) -> str:
    """The version of ``artifact`` that Spark runs with: its jar in the wheel."""
    found = [
        m[1]
        for path in WHEEL_JARS.glob(f"{artifact}-*.jar")
        if (m := re.fullmatch(rf"{re.escape(artifact)}-(\d[^-]*)\.jar", path.name))
    ]
    assert len(found) == 1, f"expected one {artifact} in {WHEEL_JARS}, found {found}"
    return found[0]


def spark_jackson_version() -> str:
    """The Jackson version Spark runs with: the wheel's jackson-databind."""
    return wheel_version("jackson-databind")


def release_train(version: str) -> str:
    """``2.20.0`` -> ``2.20``: Jackson's annotations carry the train alone from 2.20 on."""
    return ".".join(version.split(".")[:2])


@pytest.fixture(scope="module")
def locked() -> tuple[LockedJar, ...]:
    return read_jar_lock(LOCK)


def test_lock_lists_every_jackson_artifact_the_job_needs(locked: tuple[LockedJar, ...]) -> None:
    assert {jar.artifact for jar in locked} >= REQUIRED


def test_all_jackson_entries_share_the_spark_runtime_version(
    locked: tuple[LockedJar, ...],
) -> None:
    """One Jackson release train, each artifact at the version Spark ships it in;
    an artifact the wheel lacks (CBOR) at jackson-databind's version."""
    jackson = [jar for jar in locked if jar.group.startswith(JACKSON_GROUP)]
    assert len(jackson) >= len(REQUIRED)
    for jar in jackson:
        in_wheel = (WHEEL_JARS / jar.file_name).is_file() or any(
            WHEEL_JARS.glob(f"{jar.artifact}-*.jar")
        )
        expected = wheel_version(jar.artifact) if in_wheel else spark_jackson_version()
        assert jar.version == expected, f"{jar.artifact}: lock {jar.version}, Spark {expected}"
    assert {release_train(jar.version) for jar in jackson} == {"2.20"}
    # What Spark 4.1.x ships in pyspark/jars/ (4.0.x shipped 2.18.2).
    assert spark_jackson_version() == "2.20.0"


def test_checksums_match_the_wheel_copies(locked: tuple[LockedJar, ...]) -> None:
    in_wheel = [jar for jar in locked if (WHEEL_JARS / jar.file_name).is_file()]
    assert {jar.artifact for jar in in_wheel} >= REQUIRED - {"jackson-dataformat-cbor"}
    for jar in in_wheel:
        actual = hashlib.sha256((WHEEL_JARS / jar.file_name).read_bytes()).hexdigest()
        assert jar.sha256 == actual, f"{jar.file_name}: lock {jar.sha256}, wheel {actual}"
        assert jar.verified_from == f"pyspark-{pyspark.__version__}-wheel"


def test_jars_not_in_the_wheel_do_not_claim_wheel_provenance(
    locked: tuple[LockedJar, ...],
) -> None:
    outside = [jar for jar in locked if not (WHEEL_JARS / jar.file_name).is_file()]
    assert [jar.artifact for jar in outside] == ["jackson-dataformat-cbor"]
    for jar in outside:
        assert not jar.verified_from.startswith("pyspark-")
        # Either still unverified (marked) or pinned by someone who verified it.
        assert jar.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", jar.sha256)


def test_repository_path_is_maven_layout(locked: tuple[LockedJar, ...]) -> None:
    core = next(jar for jar in locked if jar.artifact == "jackson-core")
    assert core.repository_path == (
        "com/fasterxml/jackson/core/jackson-core/2.20.0/jackson-core-2.20.0.jar"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("a:b:c 0123 x", "sha256"),
        ("a:b:c:d " + "0" * 64 + " x", "coordinates"),
        ("a:b:c " + "0" * 64, "expected"),
    ],
)
def test_malformed_lock_lines_are_rejected(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_jar_lock(line)
