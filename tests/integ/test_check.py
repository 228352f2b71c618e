"""The snapshot check: CDK's diff engine names destructive changes (unit,
on small templates), and, on one synth of the integration app shared by this
module, the committed snapshot is current (what CI enforces), make integ's
dry run prints what it would deploy, and the assertion stacks hold the calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from integ import check, run, snapshot
from integ.app import build, load_config

BUCKET = {"Type": "AWS::S3::Bucket", "Properties": {}}
TABLE = {
    "Type": "AWS::Glue::Table",
    "Properties": {"DatabaseName": "db", "CatalogId": "1", "TableInput": {"Name": "events"}},
}


def compare(tmp_path: Path, before: dict[str, object], after: dict[str, object]) -> list[str]:
    for name, resources in (("expected", before), ("actual", after)):
        (tmp_path / name).mkdir()
        text = json.dumps({"Resources": resources})
        (tmp_path / name / "Streaming-x.template.json").write_text(text, encoding="utf-8")
    results = check.compare(tmp_path / "expected", tmp_path / "actual")
    return list(check.accepted_changes(results))


def test_a_renamed_bucket_logical_id_destroys_a_stateful_resource(tmp_path: Path) -> None:
    changes = compare(tmp_path, {"DataBucket": BUCKET}, {"EventsDataBucket": BUCKET})
    assert changes == ["Streaming-x: DataBucket (AWS::S3::Bucket, stateful) - Impact: WILL_DESTROY"]


def test_a_table_moved_to_another_database_is_replaced(tmp_path: Path) -> None:
    moved = {**TABLE, "Properties": {**TABLE["Properties"], "DatabaseName": "other"}}  # type: ignore[dict-item]
    changes = compare(tmp_path, {"EventsTable": TABLE}, {"EventsTable": moved})
    assert changes == [
        "Streaming-x: EventsTable (AWS::Glue::Table, stateful) - Impact: WILL_REPLACE"
    ]


def test_an_in_place_update_is_a_difference_but_not_destructive(tmp_path: Path) -> None:
    stream = {"Type": "AWS::Kinesis::Stream", "Properties": {"ShardCount": 1}}
    grown = {"Type": "AWS::Kinesis::Stream", "Properties": {"ShardCount": 2}}
    assert compare(tmp_path, {"EventsStream": stream}, {"EventsStream": grown}) == []
    results = check.compare(tmp_path / "expected", tmp_path / "actual")
    assert [r.status for r in results] == ["changed"]


def test_the_report_asks_for_a_reasoned_update() -> None:
    result = check.StackResult(
        "Streaming-x",
        "changed",
        "[-] AWS::S3::Bucket DataBucket destroy\n",
        ({"logicalId": "DataBucket", "type": "AWS::S3::Bucket", "impact": "WILL_DESTROY"},),
    )
    lines = check.render([result])
    assert "!!! This snapshot contains destructive changes !!!" in lines
    assert lines[-1] == "Snapshot results: 1 changed, 0 unchanged"


def test_an_update_without_a_reason_is_refused() -> None:
    with pytest.raises(SystemExit):
        check.parse(["--update"])


@pytest.fixture(scope="module")
def assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The integration app, synthesized once for this module (~30 s)."""
    out = tmp_path_factory.mktemp("integ") / "cdk.out"
    build(load_config(), outdir=str(out)).app.synth()
    return out


@pytest.mark.synth
def test_the_committed_snapshot_is_current(assembly: Path, tmp_path: Path) -> None:
    """CI's snapshot check: on failure, the report says what changed and how
    to accept it (make integ-snapshot REASON=...)."""
    for name, text in snapshot.from_assembly(assembly).items():
        (tmp_path / f"{name}{snapshot.TEMPLATE_SUFFIX}").write_text(text, encoding="utf-8")
    results = check.compare(snapshot.SNAPSHOT_DIR, tmp_path)
    report = "\n".join(check.render(results))
    assert {r.status for r in results} == {"same"}, report
    assert snapshot.unexplained() is None


@pytest.mark.synth
def test_the_dry_run_prints_what_it_would_deploy(
    assembly: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run.main(["--dry-run", "--assembly", str(assembly)]) == 0
    out = capsys.readouterr().out
    assert "serverless instance integ-eu-west-1; it would deploy:" in out
    assert "1 AWS::EMRServerless::Application" in out
    assert "IntegAssert-integ-eu-west-1:" in out
    assert "Streaming-integ-eu-west-2" not in out
    assert "7. leftovers" in out


@pytest.mark.synth
def test_the_assertions_produce_then_await_each_proof(assembly: Path) -> None:
    text = (assembly / "IntegAssert-integ-eu-west-1.template.json").read_text(encoding="utf-8")
    for call in ("putRecords", "listJobRuns", "getTable", "listObjectsV2", "getMetricStatistics"):
        assert call in text, call
