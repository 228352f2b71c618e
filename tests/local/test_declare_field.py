"""The copy of cdk.json a local redeploy declares a new field in, and the
``python -m local --declare`` step that redeploys from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.config import load_instances, read_cdk_context
from infra.schema_change import check_schema_change
from local import __main__ as local_main
from local.declare_field import declare_field, write_declared_copy
from tests.fixtures import EXAMPLE_CDK_JSON, SCHEMAS_CDK_JSON

CHANNEL = {"name": "channel", "required": False}


def _raw(path: Path = EXAMPLE_CDK_JSON) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return raw


def _instance(path: Path, instance_id: str) -> Any:
    return next(i for i in load_instances(read_cdk_context(path)) if i.instance_id == instance_id)


@pytest.mark.parametrize(
    ("cdk_json", "instance_id"),
    [
        (EXAMPLE_CDK_JSON, "orders-ap-northeast-2"),  # the default fields
        (SCHEMAS_CDK_JSON, "payments-eu-west-1"),  # its own fields, pinned
    ],
)
def test_the_copy_is_an_additive_change_synth_accepts(
    tmp_path: Path, cdk_json: Path, instance_id: str
) -> None:
    before = _instance(cdk_json, instance_id)
    copy = write_declared_copy(cdk_json, tmp_path / "cdk.json", instance_id, CHANNEL)
    after = _instance(copy, instance_id)
    assert [f.name for f in after.job.event_fields] == [
        *(f.name for f in before.job.event_fields),
        "channel",
    ]
    assert after.seed_schema() == before.seed_schema(), "the table's seed is unchanged"
    changes = check_schema_change(instance_id, after.seed_schema(), after.declared_schema())
    assert [(c.field, c.allowed) for c in changes] == [("channel", True)]


def test_a_pinned_instance_gets_its_seed_written_once() -> None:
    raw = _raw(SCHEMAS_CDK_JSON)
    once = declare_field(raw, "payments-eu-west-1", CHANNEL)
    entry = once["context"]["streaming"]["instances"][1]
    assert [f["name"] for f in entry["table_seed"]["event_fields"]][-1] == "fxRate"
    assert entry["table_seed"]["id_field"] == "paymentId"
    twice = declare_field(once, "payments-eu-west-1", {"name": "tier", "required": False})
    assert twice["context"]["streaming"]["instances"][1]["table_seed"] == entry["table_seed"]
    assert "table_seed" not in raw["context"]["streaming"]["instances"][1], "input untouched"


def test_a_field_declared_already_or_an_unknown_instance_is_refused() -> None:
    with pytest.raises(ValueError, match=r"'id' is declared already"):
        declare_field(_raw(), "orders-ap-northeast-2", {"name": "id"})
    with pytest.raises(ValueError, match=r"'nope-eu-west-1': not in the cdk\.json"):
        declare_field(_raw(), "nope-eu-west-1", CHANNEL)


class _Redeployed:
    """What ``--declare`` needs of a running instance, recording the redeploy."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.job = None
        self.got: Any = None

    def redeploy(self, instance: Any) -> None:
        self.got = instance


def test_local_declare_redeploys_every_instance_from_one_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_main, "CDK_JSON", EXAMPLE_CDK_JSON)
    runs = [_Redeployed("orders-ap-northeast-2"), _Redeployed("payments-ap-northeast-2")]
    local_main._declare_and_redeploy(runs, "channel", tmp_path)  # type: ignore[arg-type]
    for run in runs:
        assert run.got.instance_id == run.name
        assert run.got.job.event_fields[-1].name == "channel"
    assert (tmp_path / "cdk.json").exists()
    args = local_main.parse_args(["--declare", "channel"])
    assert (args.declare, args.undeclared_share) == ("channel", 0.2)
