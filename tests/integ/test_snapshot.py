"""The snapshot's normal form and its record of accepted updates."""

from __future__ import annotations

import json
from pathlib import Path

from integ import snapshot

HASH_A = "a" * 64
HASH_B = "b" * 64


def template(*keys: str) -> str:
    return json.dumps({"Resources": {"F": {"Properties": {"Keys": list(keys)}}}})


def test_asset_hashes_become_their_manifest_order() -> None:
    ids = snapshot.asset_ids({"files": {HASH_B: {}, HASH_A: {}}})
    text = snapshot.normalise(template(f"{HASH_A}.zip", f"{HASH_B}.zip"), ids)
    assert json.loads(text)["Resources"]["F"]["Properties"]["Keys"] == ["Asset2.zip", "Asset1.zip"]


def test_a_new_asset_hash_leaves_the_normal_form_unchanged() -> None:
    before = snapshot.normalise(template(f"{HASH_A}.zip"), [HASH_A])
    after = snapshot.normalise(template(f"{HASH_B}.zip"), [HASH_B])
    assert before == after


def test_staged_versions_are_numbered_by_first_occurrence() -> None:
    versions = snapshot.staged_versions(["job-package-0123456789abcdef", "cdk.out", "asset.x"])
    assert versions == ["0123456789abcdef"]
    text = snapshot.normalise(template("step-0123456789abcdef"), [], versions)
    assert "step-Version1" in text


def test_the_job_runs_request_digest_is_left_out() -> None:
    """The request name carries a digest of the job's version: a job code
    change alone leaves the normal form as it is."""
    before = snapshot.normalise(template("streaming-integ-eu-west-1-ec38658e9f5c"), [])
    after = snapshot.normalise(template("streaming-integ-eu-west-1-171e9f6a1802"), [])
    assert before == after
    assert "streaming-integ-eu-west-1-RequestDigest" in before


def test_a_changed_property_changes_the_normal_form() -> None:
    assert snapshot.normalise(template("a"), []) != snapshot.normalise(template("b"), [])


def write_snapshot(directory: Path, reason: str) -> None:
    templates = {"Streaming-x": snapshot.normalise(template("a"), [])}
    update = snapshot.Update(reason, (), snapshot.digest(templates))
    snapshot.write(templates, update, directory)


def test_a_recorded_update_explains_the_snapshot(tmp_path: Path) -> None:
    write_snapshot(tmp_path, "first")
    assert snapshot.unexplained(tmp_path) is None
    assert [u.reason for u in snapshot.updates(tmp_path)] == ["first"]


def test_a_snapshot_edited_by_hand_is_unexplained(tmp_path: Path) -> None:
    write_snapshot(tmp_path, "first")
    (tmp_path / "Streaming-x.template.json").write_text(template("edited"), encoding="utf-8")
    problem = snapshot.unexplained(tmp_path)
    assert problem is not None
    assert "not those of the last recorded update" in problem


def test_an_update_without_a_reason_is_unexplained(tmp_path: Path) -> None:
    write_snapshot(tmp_path, "  ")
    problem = snapshot.unexplained(tmp_path)
    assert problem is not None
    assert "has no reason" in problem


def test_no_recorded_update_is_unexplained(tmp_path: Path) -> None:
    problem = snapshot.unexplained(tmp_path)
    assert problem is not None
    assert "no recorded update" in problem
