"""scripts.migrate_checkpoint: refuse while the job runs, move aside locally and on S3.

The old checkpoint here holds the files Spark 4.1.1 wrote for the old plan
(the operator metadata bytes are the ones seen on a real run; the real
checkpoint is tested in tests/job/test_dedup_seed.py and
tests/e2e/test_checkpoint_migration.py). S3 is in-process moto.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local.harness import replace_fields
from model.checkpoint_state import inspect_checkpoint
from model.lease import FileLease, S3Lease
from scripts import migrate_checkpoint
from scripts.migrate_checkpoint import aside_location, deletion_order, kept_inside, move_s3
from scripts.status.target import Target
from tests.model.test_checkpoint_state import PER_ID_V2
from tests.scripts.local_runs import INSTANCE, REGION, write_local_run

OLD_METADATA = (
    b'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"dedupeWithinWatermark"},'
    b'"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":2}]}'
)
NEW_METADATA = b'v2\n{"operatorInfo":{"operatorId":0,"operatorName":"transformWithStateExec"}}'
NOW = datetime(2026, 11, 25, 9, 30, 5, tzinfo=UTC)


def old_files(metadata: bytes = OLD_METADATA) -> dict[str, bytes]:
    return {
        "metadata": b'{"id":"q"}',
        "offsets/0": b"v1\n{}\n{}",
        "commits/0": b'v1\n{"nextBatchWatermarkMs":0}',
        "state/0/0/1.changelog": b"x" * 84,
        "state/0/1/1.changelog": b"y" * 133,
        "state/0/0/_metadata/schema": b'..."expiresAtMicros"...',
        "state/0/_metadata/metadata": metadata,
        # A claim-checked original (no failure_store_location): it stays.
        "_failures/stream/shard/42": b"original",
    }


def moved(files: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if not k.startswith("_failures/")}


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)


def run(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    return migrate_checkpoint.main(list(args), out), out.getvalue()


def test_the_aside_name_and_the_deletion_order() -> None:
    assert aside_location("s3://b/checkpoints/x/", "dedupeWithinWatermark", NOW) == (
        "s3://b/checkpoints/x.dedupeWithinWatermark-20261125T093005Z"
    )
    keys = ["p/state/0/_metadata/metadata", "p/_lease", "p/state/0/0/1.changelog", "p/commits/0"]
    keys += ["p/_failures/s/1", "p/_exit"]
    assert deletion_order(keys, "p/", "_failures") == [
        "p/commits/0",
        "p/state/0/0/1.changelog",
        "p/state/0/_metadata/metadata",
    ]
    assert kept_inside("s3://b/c/x/", "s3://b/c/x/_failures/") == "_failures"
    assert kept_inside("s3://b/c/x", "s3://b/failures/x/") is None
    assert kept_inside("/w/x/checkpoint", "/w/x/checkpoint2/_failures/") is None


def test_a_local_run_checkpoint_is_moved_aside(tmp_path: Path) -> None:
    config = write_local_run(tmp_path)
    checkpoint = Path(config.checkpoint_location)
    write_tree(checkpoint, old_files())
    target = ["--instance", INSTANCE, "--work-dir", str(tmp_path)]

    code, out = run(*target, "--dry-run")
    assert code == 0 and "dry run: would move it to" in out and checkpoint.is_dir()

    code, out = run(*target)
    assert code == 0, out
    (aside,) = checkpoint.parent.glob("checkpoint.dedupeWithinWatermark-*")
    assert (aside / "state/0/_metadata/metadata").read_bytes() == OLD_METADATA
    assert sorted(str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*") if p.is_file()) == [
        "_failures/stream/shard/42"
    ], "the claim-check store stays where the pointer records say"
    assert not (aside / "_failures").exists()
    marker = json.loads((aside / "_migration.json").read_text())
    assert marker["from"] == str(checkpoint) and marker["operator"] == "dedupeWithinWatermark"
    assert f"moved to {aside}" in out and "next: start the job again" in out
    assert "Moving to the timer de-duplication" in out

    code, out = run(*target)
    assert code == 0 and "nothing to move" in out


def test_a_running_job_is_not_touched(tmp_path: Path) -> None:
    config = write_local_run(tmp_path)
    checkpoint = Path(config.checkpoint_location)
    write_tree(checkpoint, old_files())
    holder = FileLease(checkpoint / "_lease", INSTANCE, "vm:4242")
    holder.acquire(0)
    try:
        code, _ = run("--instance", INSTANCE, "--work-dir", str(tmp_path))
    finally:
        holder.release()
    assert code == migrate_checkpoint.EXIT_RUNNING
    assert (checkpoint / "state/0/_metadata/metadata").exists()
    assert not list(checkpoint.parent.glob("checkpoint.*"))


def test_a_new_operators_checkpoint_is_left_alone(tmp_path: Path) -> None:
    config = write_local_run(tmp_path)
    checkpoint = Path(config.checkpoint_location)
    files = old_files()
    del files["state/0/_metadata/metadata"], files["state/0/0/_metadata/schema"]
    write_tree(checkpoint, {**files, "state/0/_metadata/v2/0": NEW_METADATA})
    code, out = run("--instance", INSTANCE, "--work-dir", str(tmp_path))
    assert code == 0 and "0:transformWithStateExec" in out and "nothing to move" in out
    assert checkpoint.is_dir()


def test_an_earlier_processors_checkpoint_is_moved_aside(tmp_path: Path) -> None:
    """Keyed by id: Spark would resume it and read every id it held as new, so
    it moves like the old operator's."""
    config = write_local_run(tmp_path)
    checkpoint = Path(config.checkpoint_location)
    files = old_files()
    del files["state/0/_metadata/metadata"], files["state/0/0/_metadata/schema"]
    write_tree(checkpoint, {**files, "state/0/_metadata/v2/0": PER_ID_V2.encode()})
    code, out = run("--instance", INSTANCE, "--work-dir", str(tmp_path))
    assert code == 0, out
    assert (
        "an earlier de-duplication keyed by id (state variables "
        "['horizonEnd', '$eventTimers_keyToTimestamp'], not ['horizonEnds', 'expiringIds'])"
    ) in out
    (aside,) = checkpoint.parent.glob("checkpoint.transformWithStateExec-*")
    assert (aside / "state/0/_metadata/v2/0").read_text() == PER_ID_V2
    assert inspect_checkpoint(str(checkpoint)).operators == ()


def _s3_target(s3: Any, files: dict[str, bytes]) -> Target:
    s3.create_bucket(Bucket="data", CreateBucketConfiguration={"LocationConstraint": REGION})
    for name, body in files.items():
        s3.put_object(Bucket="data", Key=f"checkpoints/orders/{name}", Body=body)
    config = replace_fields(
        write_local_run(Path("/tmp/unused-migrate")),
        {"checkpoint_location": "s3://data/checkpoints/orders", "lease_ttl_sec": 30},
    )
    return Target(config, "test", "Streaming-x", local=False)


def _keys(s3: Any, prefix: str) -> dict[str, bytes]:
    listed = s3.list_objects_v2(Bucket="data", Prefix=prefix).get("Contents", [])
    return {
        o["Key"][len(prefix) :]: s3.get_object(Bucket="data", Key=o["Key"])["Body"].read()
        for o in listed
    }


def test_an_s3_checkpoint_is_copied_then_deleted_and_a_held_lease_refuses() -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        target = _s3_target(s3, old_files())
        holder = S3Lease(s3, "data", "checkpoints/orders/_lease", INSTANCE, "emr:1", 30)
        holder.acquire(0)
        lines: list[str] = []
        with pytest.raises(migrate_checkpoint.OperatorError) as refused:
            migrate_checkpoint.migrate(target, dry_run=False, attempts=2, log=lines.append)
        assert refused.value.code == migrate_checkpoint.EXIT_RUNNING
        assert "make stop-job" in str(refused.value)
        holder.release()

        code = migrate_checkpoint.migrate(
            target, dry_run=False, attempts=2, log=lines.append, clock=lambda: NOW
        )
        assert code == 0
        aside = "checkpoints/orders.dedupeWithinWatermark-20261125T093005Z/"
        moved_keys = _keys(s3, aside)
        assert {k: v for k, v in moved_keys.items() if k != "_migration.json"} == moved(old_files())
        assert json.loads(moved_keys["_migration.json"])["completed"] == NOW.isoformat()
        assert _keys(s3, "checkpoints/orders/") == {"_failures/stream/shard/42": b"original"}, (
            "sources and the command's lease gone; the claim-check store stays"
        )
        assert not inspect_checkpoint("s3://data/checkpoints/orders", s3).operators


def test_an_s3_move_that_stopped_midway_is_resumed_into_the_same_prefix() -> None:
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        target = _s3_target(s3, old_files())
        source = migrate_checkpoint.S3Prefix.of("s3://data/checkpoints/orders")
        first = migrate_checkpoint.S3Prefix.of(
            aside_location(source.uri(), "dedupeWithinWatermark", NOW)
        )
        failing = FailingDeletes(s3, after=0)
        with pytest.raises(migrate_checkpoint.OperatorError) as stopped:
            move_s3(
                failing, source, first, operator="x", attempts=1, log=print,
                clock=lambda: NOW, keep="_failures",
            )  # fmt: skip
        assert stopped.value.code == migrate_checkpoint.EXIT_PARTIAL
        # The job still refuses what is left: the operator metadata goes last.
        assert inspect_checkpoint(source.uri(), s3).old_operators

        later: Callable[[], datetime] = lambda: NOW.replace(hour=11)  # noqa: E731
        lines: list[str] = []
        assert (
            migrate_checkpoint.migrate(
                target, dry_run=False, attempts=2, log=lines.append, clock=later
            )
            == 0
        )
        assert any("resuming the move begun earlier" in line for line in lines)
        siblings = s3.list_objects_v2(Bucket="data", Prefix="checkpoints/orders.", Delimiter="/")
        assert [p["Prefix"] for p in siblings["CommonPrefixes"]] == [first.prefix]
        assert {k for k in _keys(s3, first.prefix) if k != "_migration.json"} == set(
            moved(old_files())
        )
        assert set(_keys(s3, "checkpoints/orders/")) == {"_failures/stream/shard/42"}


class FailingDeletes:
    """An S3 client whose DeleteObjects reports every key failed after ``after`` calls."""

    def __init__(self, s3: Any, after: int) -> None:
        self._s3 = s3
        self._left = after

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)

    def delete_objects(self, **kw: Any) -> Any:
        if self._left <= 0:
            keys = [o["Key"] for o in kw["Delete"]["Objects"]]
            # Delete all but the last (the operator metadata), then report it failed.
            self._s3.delete_objects(
                Bucket=kw["Bucket"], Delete={"Objects": [{"Key": k} for k in keys[:-1]]}
            )
            return {"Errors": [{"Key": keys[-1], "Code": "InternalError"}]}
        self._left -= 1
        return self._s3.delete_objects(**kw)
