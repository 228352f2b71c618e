"""model.checkpoint_state without Spark: the parsing, the refusal's text, the seed's window.

The files are the bytes Spark 4.1.1 wrote on a real run of each plan (the real
checkpoints are tested in test_dedup_seed.py, with Spark).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from job.dedup_seed import seed_cutoff
from model.checkpoint_state import (
    OLD_DEDUP_OPERATOR,
    CheckpointState,
    OldCheckpointError,
    StatefulOperator,
    batch_ids,
    check_resumable,
    inspect_checkpoint,
    operator_name,
    refusal,
    schema_operator,
    state_variables,
)
from model.config import ConfigError

V1 = (
    'v1\n{"operatorInfo":{"operatorId":0,"operatorName":"dedupeWithinWatermark"},'
    '"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":2}]}'
)
V2 = (
    'v2\n{"operatorInfo":{"operatorId":0,"operatorName":"transformWithStateExec"},'
    '"stateStoreInfo":[],"operatorPropertiesJson":"{}"}'
)
# What Spark 4.1.1 wrote for the timers-only processor (one batch of a probe
# run), the same with the per-id value of the next version, and what it wrote
# for the job's processor (ids in buckets; a real checkpoint of it passes the
# check in test_dedup_seed.py).
TIMERS_ONLY_V2 = (
    'v2\n{"operatorInfo":{"operatorId":0,"operatorName":"transformWithStateExec"},'
    '"stateStoreInfo":[],"operatorPropertiesJson":"{\\"timeMode\\":\\"EventTime\\",'
    '\\"outputMode\\":\\"Append\\",\\"stateVariables\\":[{\\"stateName\\":'
    '\\"$eventTimers_keyToTimestamp\\",\\"stateVariableType\\":\\"TimerState\\",'
    '\\"ttlEnabled\\":false}]}"}'
)
PER_ID_V2 = TIMERS_ONLY_V2.replace(
    '\\"stateVariables\\":[',
    '\\"stateVariables\\":[{\\"stateName\\":\\"horizonEnd\\",'
    '\\"stateVariableType\\":\\"ValueState\\",\\"ttlEnabled\\":false},',
)
BUCKETS_V2 = (
    'v2\n{"operatorInfo":{"operatorId":0,"operatorName":"transformWithStateExec"},'
    '"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":2,'
    '"stateSchemaFilePaths":["file:/tmp/c/state/0/_stateSchema/default/0_48d48187"]}],'
    '"operatorPropertiesJson":"{\\"timeMode\\":\\"EventTime\\",\\"outputMode\\":'
    '\\"Append\\",\\"stateVariables\\":[{\\"stateName\\":\\"horizonEnds\\",'
    '\\"stateVariableType\\":\\"MapState\\",\\"ttlEnabled\\":false},{\\"stateName\\":'
    '\\"expiringIds\\",\\"stateVariableType\\":\\"MapState\\",\\"ttlEnabled\\":false},'
    '{\\"stateName\\":\\"$eventTimers_keyToTimestamp\\",\\"stateVariableType\\":'
    '\\"TimerState\\",\\"ttlEnabled\\":false}]}"}'
)
OLD_SCHEMA = (
    b'\x00\x02v2\x00\x00\x00\x01\x00`{"type":"struct","fields":[{"name":"_dedup_key"}]}'
    b'\x00\x00\x00\x01\x00d{"type":"struct","fields":[{"name":"expiresAtMicros","type":"long"}]}'
)


def test_operator_names_are_read_from_either_metadata_version() -> None:
    assert operator_name(V1) == OLD_DEDUP_OPERATOR
    assert operator_name(V2) == "transformWithStateExec"
    for garbage in ("", "v1", "v1\nnot json", 'v1\n{"operatorInfo": 3}', "x\n{}"):
        assert operator_name(garbage) is None
    assert schema_operator(OLD_SCHEMA) == OLD_DEDUP_OPERATOR
    assert schema_operator(b'{"name":"seen"}') is None
    assert batch_ids(["3", ".3.crc", "10", "3.tmp"]) == (3, 10)


def test_state_variables_are_read_from_a_v2_file_only() -> None:
    assert state_variables(TIMERS_ONLY_V2) == ("$eventTimers_keyToTimestamp",)
    assert state_variables(PER_ID_V2) == ("horizonEnd", "$eventTimers_keyToTimestamp")
    assert state_variables(BUCKETS_V2) == (
        "horizonEnds",
        "expiringIds",
        "$eventTimers_keyToTimestamp",
    )
    for none in (V1, V2, "", 'v2\n{"operatorPropertiesJson": "not json"}'):
        assert state_variables(none) is None


@pytest.mark.parametrize(
    ("name", "v2", "variables"),
    [
        ("timers-only", TIMERS_ONLY_V2, ["$eventTimers_keyToTimestamp"]),
        ("per-id", PER_ID_V2, ["horizonEnd", "$eventTimers_keyToTimestamp"]),
    ],
)
def test_an_earlier_processors_checkpoint_is_refused(
    tmp_path: Path, name: str, v2: str, variables: list[str]
) -> None:
    """Keyed by id, not by bucket: Spark resumes it silently (it adds the new
    maps' column families), every id it held would read as new, so the job must
    refuse it, as the old operator's."""
    old = tmp_path / name
    _write(old, {"state/0/_metadata/v2/3": v2, "commits/3": "v1"})
    found = inspect_checkpoint(str(old))
    assert [list(op.state_variables or ()) for op in found.old_operators] == [variables]
    with pytest.raises(OldCheckpointError) as refused:
        check_resumable(found, "orders-eu-west-1")
    assert (
        f"[operator 0 'transformWithStateExec', an earlier de-duplication keyed by id "
        f"(state variables {variables}, not ['horizonEnds', 'expiringIds']) "
        f"({old}/state/0/_metadata/v2/3); last committed batch 3]"
    ) in str(refused.value)
    assert "make migrate-checkpoint INSTANCE=orders-eu-west-1" in str(refused.value)


def test_the_job_processors_checkpoint_is_resumed(tmp_path: Path) -> None:
    current = tmp_path / "current"
    _write(current, {"state/0/_metadata/v2/3": BUCKETS_V2, "commits/3": "v1"})
    found = inspect_checkpoint(str(current))
    assert found.operators[0].resumable and found.old_operators == ()
    check_resumable(found, "orders-eu-west-1")


def _write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body if isinstance(body, bytes) else body.encode())


def test_a_local_checkpoint_is_inspected_one_directory_at_a_time(tmp_path: Path) -> None:
    assert inspect_checkpoint(str(tmp_path / "none")) == CheckpointState(
        str(tmp_path / "none"), (), ()
    )
    new = tmp_path / "new"
    _write(new, {"state/0/_metadata/v2/0": "garbage", "state/0/_metadata/v2/7": V2})
    _write(new, {"offsets/0": "v1", "commits/.0.crc": "", "state/0/0/1.changelog": "x"})
    found = inspect_checkpoint(f"file://{new}/")
    assert found.operators == (
        StatefulOperator("0", "transformWithStateExec", f"file://{new}/state/0/_metadata/v2/7"),
    )
    assert not found.committed and found.old_operators == ()
    check_resumable(found, "orders-eu-west-1")

    old = tmp_path / "old"
    _write(old, {"state/0/0/_metadata/schema": OLD_SCHEMA, "commits/0": "v1", "commits/4": "v1"})
    found = inspect_checkpoint(str(old))
    assert [op.evidence for op in found.old_operators] == [f"{old}/state/0/0/_metadata/schema"]
    assert found.committed_batches == (0, 4)


def test_the_refusal_names_the_checkpoint_what_it_holds_and_the_fix() -> None:
    state = CheckpointState(
        "s3://data/checkpoints/orders-eu-west-1/",
        (StatefulOperator("0", OLD_DEDUP_OPERATOR, "s3://data/x/state/0/_metadata/metadata"),),
        (0, 1, 2),
    )
    text = refusal(state, "orders-eu-west-1")
    assert text.startswith(
        "checkpoint s3://data/checkpoints/orders-eu-west-1/ holds de-duplication state this "
        "job cannot resume [operator 0 'dedupeWithinWatermark', dropDuplicatesWithinWatermark "
        "(s3://data/x/state/0/_metadata/metadata); last committed batch 2]"
    )
    assert "make migrate-checkpoint INSTANCE=orders-eu-west-1" in text
    assert text.endswith(
        '(docs/operate.md, "Moving to the timer de-duplication (from '
        'dropDuplicatesWithinWatermark)")'
    )
    with pytest.raises(OldCheckpointError) as refused:
        check_resumable(state, "orders-eu-west-1")
    assert isinstance(refused.value, ConfigError), "the job's exit code 2"


def test_the_seed_window_is_the_horizon_plus_the_retention() -> None:
    now = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)
    assert seed_cutoff(now, 48, 24) == datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
