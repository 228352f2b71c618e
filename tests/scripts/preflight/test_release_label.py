"""scripts.preflight.release_label: the release label offered in the region,
or a fail with the fix."""

from __future__ import annotations

from scripts.preflight import release_label
from tests.scripts.preflight.stubs import Stub, _config


def test_release_label_passes_when_the_region_lists_it() -> None:
    clients = {"emr": Stub(list_release_labels={"ReleaseLabels": ["emr-spark-8.1.0"]})}
    assert release_label.check_release_label(_config(), clients).ok


def test_release_label_missing_in_the_region_fails_with_the_fix() -> None:
    clients = {"emr": Stub(list_release_labels={"ReleaseLabels": ["emr-7.10.0"]})}
    result = release_label.check_release_label(_config(), clients)
    assert not result.ok
    assert "emr-spark-8.1.0 is not offered in eu-west-1 (found: emr-7.10.0)" in result.detail
    assert "emr/releases.py" in result.fix
