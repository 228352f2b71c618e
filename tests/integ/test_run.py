"""make integ's plan: one instance selected, the update merged, the order of
the lifecycle; the dry run itself is in tests/integ/test_check.py (it shares
that module's one synth)."""

from __future__ import annotations

import pytest

from infra.config import CONTEXT_KEY, SELECTION_CONTEXT_KEY, SYNTH_CHECK_CONTEXT_KEY
from integ import run
from integ.app import load_config

UPDATE = {"integ-eu-west-1": {"job": {"trigger_interval_sec": 5}}}


def entry(context: dict[str, object], region: str) -> dict[str, object]:
    instances = context[CONTEXT_KEY]["instances"]  # type: ignore[index]
    return next(i for i in instances if i["region"] == region)


def test_the_lifecycle_runs_in_order() -> None:
    steps = run.plan("integ-eu-west-1", "python", load_config(), UPDATE)
    names = [step.name for step in steps]
    assert names == ["deploy", "update", "stop", "start", "assert", "destroy", "leftovers"]


def test_the_update_step_carries_the_update_and_only_that_instance() -> None:
    steps = {s.name: s for s in run.plan("integ-eu-west-1", "python", load_config(), UPDATE)}
    first, updated = steps["deploy"].context, steps["update"].context
    assert first is not None and updated is not None
    assert updated[SELECTION_CONTEXT_KEY] == "integ-eu-west-1"
    assert entry(dict(updated), "eu-west-1")["job"] == {"trigger_interval_sec": 5}
    assert "job" not in entry(dict(first), "eu-west-1")


def test_a_real_deploy_refuses_placeholders() -> None:
    context = run.instance_context(load_config(), "integ-eu-west-2", None, "")
    assert SYNTH_CHECK_CONTEXT_KEY not in context


def test_the_tls_zip_given_replaces_the_placeholder() -> None:
    context = run.instance_context(load_config(), "integ-eu-west-2", None, "s3://b/k.zip")
    assert entry(context, "eu-west-2")["emr"] == {"tls_certificates_s3_uri": "s3://b/k.zip"}


def test_emr_without_a_tls_zip_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main(["--test", "emr"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "integ: --test emr: field --tls-certificates-s3-uri: empty; allowed: the "
        "s3:// URI make certs prints"
    ]
