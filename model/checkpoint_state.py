"""What a streaming checkpoint holds, read before the query starts.

Two questions the job asks at start (:mod:`job.driver`), and the migration
command asks too (``scripts/migrate_checkpoint.py``):

* **Which stateful operator wrote the state?** The job de-duplicates with
  ``transformWithState`` (:mod:`job.dedup`); it used to with Spark's
  ``dropDuplicatesWithinWatermark``. Spark cannot carry the old operator's
  state over: resumed on such a checkpoint, the new plan starts and then fails
  its first batch with ``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``
  (an idle stream even runs "fine" until a record arrives), and the job would
  crash on every restart. Earlier versions of the processor were keyed by id,
  with timers only or with a ``horizonEnd`` value and a timer per id: Spark
  resumes such a checkpoint without a word (it adds the new variables' column
  families), and every id it held would then read as new, its re-sends passing
  for a whole horizon. So the job refuses any ``transformWithState`` state
  that does not record this processor's variables
  (:data:`STATE_VARIABLES`), as it refuses the built-in operator's,
  naming the checkpoint, what it found and the fix (docs/operate.md, "Moving
  to the timer de-duplication").
* **Has any batch been committed?** If not, the query's next batch is its batch
  0, the only one in which Spark loads ``transformWithState``'s initial state
  (``IncrementalExecution``: ``currentBatchId == 0 && hasInitialState``), so the
  job seeds the de-duplication state from the table (:mod:`job.dedup_seed`).
  A batch 0 that was planned but not committed is replayed as batch 0, with the
  seed again.

What Spark 4.1.1 writes, seen on a checkpoint of each operator:

* ``state/<operator id>/_metadata/metadata``: ``v1`` then
  ``{"operatorInfo": {"operatorId": 0, "operatorName": "dedupeWithinWatermark"}, ...}``
  (``dropDuplicatesWithinWatermark``; Spark 4.0 writes the same file);
* ``state/<operator id>/_metadata/v2/<batch id>``: ``v2`` then
  ``{"operatorInfo": {..., "operatorName": "transformWithStateExec"}, ...,
  "operatorPropertiesJson": "{... \\"stateVariables\\": [{\\"stateName\\": ...}]}"}``
  (the processor's state variables: its timers, ``$eventTimers_keyToTimestamp``,
  and its maps, ``horizonEnds`` and ``expiringIds``);
* ``state/<operator id>/<partition>/_metadata/schema``: the state's key and
  value schemas; the old operator's value is ``expiresAtMicros``. Read only
  when no operator metadata exists (a checkpoint older than those files).

Parsing is pure (:func:`operator_name`, :func:`schema_operator`); the only I/O
is :class:`CheckpointFiles` (a local directory or ``s3://``, through the job's
own S3 client), which lists one directory level at a time: a checkpoint's
``state/`` holds a file per partition per batch, never listed whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from model.config import ConfigError
from model.storage_uri import is_s3, local_path, parse_s3_uri

# The processor's state variables (ArrivalDedupProcessor.HORIZON_ENDS and
# EXPIRING_IDS): the checkpoint check tells the job's de-duplication state
# (job.dedup, jvm/src) by them.
STATE_VARIABLES: Final = ("horizonEnds", "expiringIds")

# Spark's short name of dropDuplicatesWithinWatermark's physical operator
# (StreamingDeduplicateWithinWatermarkExec.shortName).
OLD_DEDUP_OPERATOR: Final = "dedupeWithinWatermark"
# Its value schema's one field: the only trace of it in a state schema file.
OLD_DEDUP_VALUE_FIELD: Final = b'"expiresAtMicros"'
# Spark's short name of transformWithState's physical operator.
DEDUP_OPERATOR: Final = "transformWithStateExec"
STATE_DIR: Final = "state"
COMMITS_DIR: Final = "commits"
METADATA_DIR: Final = "_metadata"
OPERATOR_METADATA_V1: Final = "metadata"
OPERATOR_METADATA_V2: Final = "v2"
SCHEMA_FILE: Final = "schema"
OPERATE_SECTION: Final = (
    'docs/operate.md, "Moving to the timer de-duplication (from dropDuplicatesWithinWatermark)"'
)


class OldCheckpointError(ConfigError):
    """The checkpoint holds state the job's operator cannot resume (exit 2)."""


@dataclass(frozen=True)
class StatefulOperator:
    """One stateful operator of a checkpoint, as its files name it."""

    operator_id: str
    name: str
    evidence: str  # the file that says so
    # A transformWithState operator's state variables (None: not recorded).
    state_variables: tuple[str, ...] | None = None

    @property
    def resumable(self) -> bool:
        """The job's processor can resume this state: not the built-in
        operator's, nor an earlier processor's (keyed by id: its variables are
        not this processor's)."""
        if self.name == OLD_DEDUP_OPERATOR:
            return False
        return not (
            self.name == DEDUP_OPERATOR
            and self.state_variables is not None
            and not set(STATE_VARIABLES) <= set(self.state_variables)
        )

    def describe(self) -> str:
        what = (
            "dropDuplicatesWithinWatermark"
            if self.name == OLD_DEDUP_OPERATOR
            else "an earlier de-duplication keyed by id (state variables "
            f"{list(self.state_variables or ())}, not {list(STATE_VARIABLES)})"
        )
        return f"operator {self.operator_id} {self.name!r}, {what} ({self.evidence})"


@dataclass(frozen=True)
class CheckpointState:
    location: str
    operators: tuple[StatefulOperator, ...]
    committed_batches: tuple[int, ...]

    @property
    def committed(self) -> bool:
        """A batch was committed: batch 0 is past, a seed would be ignored."""
        return bool(self.committed_batches)

    @property
    def old_operators(self) -> tuple[StatefulOperator, ...]:
        return tuple(op for op in self.operators if not op.resumable)


def _metadata_body(text: str) -> dict[str, Any] | None:
    lines = text.splitlines()
    if len(lines) < 2 or not lines[0].startswith("v"):
        return None
    try:
        body = json.loads(lines[1])
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def operator_name(text: str) -> str | None:
    """The operator name in an operator metadata file (``v1``/``v2`` then a
    JSON line), or None for anything else. Pure."""
    body = _metadata_body(text)
    info = body.get("operatorInfo") if body is not None else None
    name = info.get("operatorName") if isinstance(info, dict) else None
    return name if isinstance(name, str) and name else None


def state_variables(text: str) -> tuple[str, ...] | None:
    """The state variable names a ``v2`` operator metadata file records
    (``operatorPropertiesJson``, itself JSON text), or None when it records
    none: a ``v1`` file, another operator, anything unreadable. Pure."""
    body = _metadata_body(text)
    properties = body.get("operatorPropertiesJson") if body is not None else None
    if not isinstance(properties, str):
        return None
    try:
        parsed = json.loads(properties)
    except ValueError:
        return None
    variables = parsed.get("stateVariables") if isinstance(parsed, dict) else None
    if not isinstance(variables, list):
        return None
    return tuple(
        v["stateName"]
        for v in variables
        if isinstance(v, dict) and isinstance(v.get("stateName"), str)
    )


def schema_operator(raw: bytes) -> str | None:
    """The old operator when a state schema file is its (value ``expiresAtMicros``). Pure."""
    return OLD_DEDUP_OPERATOR if OLD_DEDUP_VALUE_FIELD in raw else None


def batch_ids(names: list[str]) -> tuple[int, ...]:
    """Batch ids of a ``commits/`` listing (Spark's ``.N.crc`` and temp files ignored)."""
    return tuple(sorted(int(n) for n in names if n.isdigit()))


class CheckpointFiles:
    """A checkpoint's files, one directory level at a time: a local directory
    or an ``s3://`` prefix (``s3`` is a boto3 client with bounded calls)."""

    def __init__(self, location: str, s3: Any = None) -> None:
        self.location = location.rstrip("/")
        self._s3 = s3
        if is_s3(self.location):
            self._bucket, key = parse_s3_uri(self.location + "/")
            self._prefix = key
            if s3 is None:
                raise ValueError(f"{location}: an S3 checkpoint needs an S3 client")

    def uri(self, *parts: str) -> str:
        return "/".join((self.location, *parts))

    def children(self, *parts: str) -> tuple[list[str], list[str]]:
        """(directories, files) directly under ``parts``; both empty when absent."""
        if not is_s3(self.location):
            path = Path(local_path(self.location), *parts)
            if not path.is_dir():
                return [], []
            entries = sorted(path.iterdir())
            return [p.name for p in entries if p.is_dir()], [p.name for p in entries if p.is_file()]
        prefix = self._prefix + "".join(p + "/" for p in parts)
        dirs: list[str] = []
        files: list[str] = []
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self._s3.list_objects_v2(
                Bucket=self._bucket, Prefix=prefix, Delimiter="/", **extra
            )
            dirs += [p["Prefix"][len(prefix) :].rstrip("/") for p in page.get("CommonPrefixes", [])]
            files += [o["Key"][len(prefix) :] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return sorted(dirs), sorted(f for f in files if f)
            token = page["NextContinuationToken"]

    def read(self, *parts: str) -> bytes:
        if not is_s3(self.location):
            return Path(local_path(self.location), *parts).read_bytes()
        key = self._prefix + "/".join(parts)
        body: bytes = self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read()
        return body


def _operator(files: CheckpointFiles, operator_id: str) -> StatefulOperator | None:
    meta = (STATE_DIR, operator_id, METADATA_DIR)
    dirs, names = files.children(*meta)
    candidates: list[tuple[str, ...]] = []
    if OPERATOR_METADATA_V2 in dirs:
        _, versions = files.children(*meta, OPERATOR_METADATA_V2)
        latest = batch_ids(versions)
        if latest:
            candidates.append((*meta, OPERATOR_METADATA_V2, str(latest[-1])))
    if OPERATOR_METADATA_V1 in names:
        candidates.append((*meta, OPERATOR_METADATA_V1))
    for parts in candidates:
        text = files.read(*parts).decode("utf-8", "replace")
        name = operator_name(text)
        if name:
            return StatefulOperator(operator_id, name, files.uri(*parts), state_variables(text))
    # No operator metadata: a state schema file of partition 0 still tells the old operator.
    schema = (STATE_DIR, operator_id, "0", METADATA_DIR)
    if SCHEMA_FILE in files.children(*schema)[1]:
        name = schema_operator(files.read(*schema, SCHEMA_FILE))
        if name:
            return StatefulOperator(operator_id, name, files.uri(*schema, SCHEMA_FILE))
    return None


def inspect_checkpoint(location: str, s3: Any = None) -> CheckpointState:
    """The checkpoint's stateful operators and committed batches (a location
    that does not exist yet is an empty checkpoint)."""
    files = CheckpointFiles(location, s3)
    operator_ids, _ = files.children(STATE_DIR)
    operators = [_operator(files, op) for op in operator_ids if op.isdigit()]
    _, commits = files.children(COMMITS_DIR)
    return CheckpointState(
        location=files.location,
        operators=tuple(op for op in operators if op is not None),
        committed_batches=batch_ids(commits),
    )


def refusal(state: CheckpointState, instance_id: str) -> str:
    """Why the job will not start on ``state``, and what to do. Pure."""
    found = "; ".join(op.describe() for op in state.old_operators)
    last = f"last committed batch {state.committed_batches[-1]}" if state.committed else "no batch"
    return (
        f"checkpoint {state.location} holds de-duplication state this job cannot resume "
        f"[{found}; {last}]; this job de-duplicates with transformWithState, ids in "
        f"buckets with the variables {list(STATE_VARIABLES)} (on "
        "dropDuplicatesWithinWatermark's state Spark would fail the first batch with "
        "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA; on an earlier "
        "processor's state every id held would read as new). Fix: with the job stopped, "
        f"make migrate-checkpoint INSTANCE={instance_id} moves the old checkpoint aside; the "
        "next start makes a new checkpoint from the stream's trim horizon, seeded with the "
        f"table's recent ids ({OPERATE_SECTION})"
    )


def check_resumable(state: CheckpointState, instance_id: str) -> None:
    """Raise :class:`OldCheckpointError` when the checkpoint holds state the job cannot resume."""
    if state.old_operators:
        raise OldCheckpointError(refusal(state, instance_id))
