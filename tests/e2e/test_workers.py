"""How ``make test`` spreads the suite over its two workers (tests/conftest.py):
an e2e case alone, any other test with its file; the longest first."""

from __future__ import annotations

import pytest

from tests.conftest import E2E_PREFIX, FileOrE2eCase, _plan_for_workers, pytest_xdist_make_scheduler


class _Item:
    """What the plan reads of a collected test: its node id and timeout mark."""

    def __init__(self, nodeid: str, timeout: float | None = None) -> None:
        self.nodeid = nodeid
        self.timeout = timeout

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        if name != "timeout" or self.timeout is None:
            return None
        return pytest.mark.timeout(self.timeout).mark


def test_an_e2e_case_is_its_own_scope_and_any_other_test_goes_with_its_file() -> None:
    scheduler = FileOrE2eCase.__new__(FileOrE2eCase)  # _split_scope reads no state
    assert E2E_PREFIX == "tests/e2e/"
    case = (
        "tests/e2e/test_crash_loop.py::"
        "test_crash_loop_on_the_serverless_launch_path_loses_and_duplicates_nothing"
    )
    assert scheduler._split_scope(case) == case
    other = (
        "tests/e2e/test_crash_loop.py::"
        "test_crash_loop_through_enhanced_fan_out_across_a_split_and_a_merge"
    )
    assert scheduler._split_scope(other) != scheduler._split_scope(case)
    for test in ("test_a", "test_b[1-x::y]", "Class::test_c"):
        scope = scheduler._split_scope(f"tests/infra/cost/test_estimate.py::{test}")
        assert scope == "tests/infra/cost/test_estimate.py"


def test_the_scheduler_is_ours_for_loadscope_only(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pytestconfig.option, "tx", ["2*popen"])  # what -n 2 sets
    for dist in ("load", "loadfile", "loadgroup", "worksteal"):
        monkeypatch.setattr(pytestconfig.option, "dist", dist)
        assert pytest_xdist_make_scheduler(pytestconfig, None) is None, dist
    monkeypatch.setattr(pytestconfig.option, "dist", "loadscope")
    made = pytest_xdist_make_scheduler(pytestconfig, None)
    assert isinstance(made, FileOrE2eCase) and made.numnodes == 2


def test_the_longest_go_first_then_by_tier_in_collection_order() -> None:
    items = [
        _Item("tests/model/test_a.py::test_unit"),
        _Item("tests/infra/test_b.py::test_synth"),
        _Item("tests/e2e/test_c.py::test_short_e2e"),
        _Item("tests/job/test_d.py::test_spark", timeout=600),
        _Item("tests/e2e/test_e.py::test_crash", timeout=1500),
        _Item("tests/job/test_f.py::test_spark"),
        _Item("tests/model/test_g.py::test_unit"),
    ]
    tiers = {
        "tests/model/test_a.py::test_unit": "unit",
        "tests/infra/test_b.py::test_synth": "synth",
        "tests/e2e/test_c.py::test_short_e2e": "e2e",
        "tests/job/test_d.py::test_spark": "integration",
        "tests/e2e/test_e.py::test_crash": "e2e",
        "tests/job/test_f.py::test_spark": "integration",
        "tests/model/test_g.py::test_unit": "unit",
    }
    _plan_for_workers(items, tiers)  # type: ignore[arg-type]
    assert [item.nodeid for item in items] == [
        "tests/e2e/test_e.py::test_crash",
        "tests/job/test_d.py::test_spark",
        "tests/e2e/test_c.py::test_short_e2e",
        "tests/job/test_f.py::test_spark",
        "tests/infra/test_b.py::test_synth",
        "tests/model/test_a.py::test_unit",
        "tests/model/test_g.py::test_unit",
    ]
