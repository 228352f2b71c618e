"""Move an old-operator checkpoint aside: ``make migrate-checkpoint INSTANCE=<domain-region>``.

The job used to de-duplicate with Spark's ``dropDuplicatesWithinWatermark``
and now does with ``transformWithState`` (:mod:`job.dedup`); Spark cannot
resume the old operator's state, and the job refuses such a checkpoint at
start (:mod:`model.checkpoint_state`, exit 2). This command, with the job
stopped, moves the old checkpoint to a sibling named after the old operator
and the UTC time, ``<checkpoint>.dedupeWithinWatermark-<yyyymmddTHHMMSSZ>``,
and says what to do next. The next start finds no checkpoint: it reads the
stream from ``TRIM_HORIZON`` and seeds the state from the table
(:mod:`job.dedup_seed`); docs/operate.md, "Moving to the timer
de-duplication (from dropDuplicatesWithinWatermark)".

Which job: as ``status`` and ``stop`` (:mod:`scripts.status.target`):
``--work-dir`` for a local run (``make run``), else the deployed instance.

Safety:

* the job must not run: its lease (:mod:`scripts.status.lease`) must be free,
  and the command holds the lease itself while it moves (a job started
  meanwhile waits, then exits 3), renewing it on S3;
* locally the move is one ``rename``; on S3 it is a copy of every object to the
  new prefix, a check that each copy has its source's size, then the deletes,
  the operator metadata last, each call retried a bounded number of times. The
  new prefix gets ``_migration.json`` first (source, operator, start) and its
  ``completed`` time last: a run that stopped midway is resumed into the same
  prefix by the next run, and until then the job still refuses the checkpoint;
* nothing is deleted for good: the old checkpoint stays aside until someone
  deletes it;
* a claim-check store inside the checkpoint (``_failures/``, where a config
  without ``failure_store_location`` keeps failure originals, e.g. a local
  run) stays where it is: the pointer records on the failure topic name those
  paths, and ``scripts.reprocess`` reads the originals back from them.

Exit codes: 0 moved, nothing to move, or a dry run; 1 the move failed midway
(run the command again: it resumes); 2 bad arguments, unknown instance,
unreachable endpoint; 3 the job is running (stop it first: ``make
stop-job``); 5 another AWS call failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from model.checkpoint_state import (
    METADATA_DIR,
    OLD_DEDUP_OPERATOR,
    OPERATE_SECTION,
    STATE_DIR,
    inspect_checkpoint,
)
from model.contract import EXIT_RECORD_NAME
from model.lease import LEASE_NAME, LeaseHeldError, LeaseKeeper, make_lease
from model.storage_uri import is_s3, local_path, parse_s3_uri
from producer.arguments import positive_int
from scripts.command import EXIT_USAGE, OperatorError
from scripts.status.lease import job_state
from scripts.status.target import Target, target_arguments, target_command

EXIT_MOVED: Final = 0
EXIT_PARTIAL: Final = 1
EXIT_RUNNING: Final = 3
MARKER: Final = "_migration.json"
DEFAULT_ATTEMPTS: Final = 5
_DELETE_BATCH: Final = 1000  # DeleteObjects' limit per call


def aside_location(location: str, operator: str, now: datetime) -> str:
    """The sibling the old checkpoint moves to. Pure."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{location.rstrip('/')}.{operator}-{stamp}"


def kept_inside(checkpoint: str, failure_store: str) -> str | None:
    """The claim-check store's directory inside the checkpoint, which stays
    (pointer records name its paths), or None when it lives elsewhere. Pure."""
    root = checkpoint.rstrip("/") + "/"
    store = failure_store.rstrip("/") + "/"
    if not store.startswith(root) or store == root:
        return None
    return store[len(root) :].rstrip("/")


def deletion_order(keys: Iterable[str], prefix: str, keep: str | None = None) -> list[str]:
    """Every key but the lease, the exit record and the kept directory, the
    operator metadata last: a move that stops midway leaves a checkpoint the
    job still recognises (and refuses). The exit record stays, so the
    supervisor still reads the operator's stop that preceded the move and does
    not restart the job mid-migration. Pure."""
    meta = f"{prefix}{STATE_DIR}/"
    kept_dir = f"{prefix}{keep}/" if keep else None

    def last(key: str) -> bool:
        rest = key[len(meta) :].split("/") if key.startswith(meta) else []
        return len(rest) >= 2 and rest[1] == METADATA_DIR

    moving = [
        k
        for k in keys
        if k not in (prefix + LEASE_NAME, prefix + EXIT_RECORD_NAME)
        and not (kept_dir and k.startswith(kept_dir))
    ]
    return sorted(moving, key=lambda k: (last(k), k))


def attempt(action: Callable[[], Any], what: str, attempts: int, wait: float = 0.5) -> Any:
    """``action()``, tried at most ``attempts`` times, waits doubling (at most 8 s)."""
    for number in range(1, attempts + 1):
        try:
            return action()
        except (BotoCoreError, ClientError):
            if number == attempts:
                raise
            time.sleep(min(wait * 2 ** (number - 1), 8.0))
    raise AssertionError("unreachable")  # pragma: no cover


@dataclass(frozen=True)
class S3Prefix:
    bucket: str
    prefix: str  # ends with "/"

    @classmethod
    def of(cls, location: str) -> S3Prefix:
        bucket, key = parse_s3_uri(location.rstrip("/") + "/")
        return cls(bucket, key)

    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


def list_objects(s3: Any, where: S3Prefix, attempts: int) -> dict[str, int]:
    """Key -> size of every object under the prefix."""
    found: dict[str, int] = {}
    token: str | None = None
    while True:
        extra = {"ContinuationToken": token} if token else {}
        page = attempt(
            partial(s3.list_objects_v2, Bucket=where.bucket, Prefix=where.prefix, **extra),
            f"list {where.uri()}",
            attempts,
        )
        found.update({o["Key"]: int(o["Size"]) for o in page.get("Contents", [])})
        if not page.get("IsTruncated"):
            return found
        token = page["NextContinuationToken"]


def unfinished_move(s3: Any, source: S3Prefix, attempts: int) -> S3Prefix | None:
    """A sibling prefix whose marker says a move of ``source`` began and did not complete."""
    parent = source.prefix.rstrip("/") + "."
    page = attempt(
        lambda: s3.list_objects_v2(Bucket=source.bucket, Prefix=parent, Delimiter="/"),
        f"list siblings of {source.uri()}",
        attempts,
    )
    for common in sorted(p["Prefix"] for p in page.get("CommonPrefixes", [])):
        try:
            body = s3.get_object(Bucket=source.bucket, Key=common + MARKER)["Body"].read()
            marker = json.loads(body)
        except s3.exceptions.NoSuchKey:
            continue
        if marker.get("from") == source.uri() and not marker.get("completed"):
            return S3Prefix(source.bucket, common)
    return None


def _marker(source: str, operator: str, started: str, completed: str | None = None) -> bytes:
    body = {"from": source, "operator": operator, "started": started, "completed": completed}
    return json.dumps(body, indent=1).encode()


def move_s3(
    s3: Any,
    source: S3Prefix,
    aside: S3Prefix,
    *,
    operator: str,
    attempts: int,
    log: Callable[[str], None],
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    keep: str | None = None,
) -> int:
    """Copy every object to ``aside``, check, delete the sources; returns the count.
    ``keep``: a directory of the checkpoint that stays (:func:`kept_inside`)."""
    marker_key = aside.prefix + MARKER
    started = clock().isoformat(timespec="seconds")
    try:
        previous = json.loads(s3.get_object(Bucket=aside.bucket, Key=marker_key)["Body"].read())
        started = str(previous.get("started") or started)
    except s3.exceptions.NoSuchKey:
        s3.put_object(
            Bucket=aside.bucket, Key=marker_key, Body=_marker(source.uri(), operator, started)
        )
    objects = list_objects(s3, source, attempts)
    moving = deletion_order(objects, source.prefix, keep)
    present = list_objects(s3, aside, attempts)
    for index, key in enumerate(moving, start=1):
        target = aside.prefix + key[len(source.prefix) :]
        if present.get(target) == objects[key]:
            continue  # copied by an earlier run
        attempt(
            partial(
                s3.copy_object,
                Bucket=aside.bucket,
                Key=target,
                CopySource={"Bucket": source.bucket, "Key": key},
            ),
            f"copy s3://{source.bucket}/{key}",
            attempts,
        )
        if index % 500 == 0:
            log(f"  copied {index:,} of {len(moving):,} objects")
    copied = list_objects(s3, aside, attempts)
    missing = [
        k for k in moving if copied.get(aside.prefix + k[len(source.prefix) :]) != objects[k]
    ]
    if missing:
        raise OperatorError(
            EXIT_PARTIAL,
            f"{len(missing)} object(s) not copied to {aside.uri()} with their size (first: "
            f"{missing[0]}); nothing was deleted; run the command again",
        )
    for begin in range(0, len(moving), _DELETE_BATCH):
        chunk = moving[begin : begin + _DELETE_BATCH]
        reply = attempt(
            partial(
                s3.delete_objects,
                Bucket=source.bucket,
                Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True},
            ),
            f"delete under {source.uri()}",
            attempts,
        )
        if reply.get("Errors"):
            first = reply["Errors"][0]
            raise OperatorError(
                EXIT_PARTIAL,
                f"deleting {first.get('Key')} failed ({first.get('Code')}); every object is "
                f"copied to {aside.uri()}; run the command again to finish",
            )
    completed = clock().isoformat(timespec="seconds")
    s3.put_object(
        Bucket=aside.bucket,
        Key=marker_key,
        Body=_marker(source.uri(), operator, started, completed),
    )
    return len(moving)


def move_local(
    source: Path, aside: Path, *, operator: str, now: datetime, keep: str | None = None
) -> None:
    """One rename (atomic on one file system), the kept directory renamed back,
    then the marker inside the moved directory."""
    if aside.exists():
        raise OperatorError(EXIT_PARTIAL, f"{aside} exists already; run the command again")
    os.rename(source, aside)
    if keep and (aside / keep).exists():
        (source / keep).parent.mkdir(parents=True, exist_ok=True)
        os.rename(aside / keep, source / keep)
    stamp = now.isoformat(timespec="seconds")
    (aside / MARKER).write_bytes(_marker(str(source), operator, stamp, stamp))


def next_step(target: Target) -> str:
    instance = target.instance_id
    if target.local:
        return (
            "next: start the job again (python -m job --config "
            f"{target.origin.removesuffix(' (local run)')} while the run's emulators are up): it "
            "starts a new checkpoint from TRIM_HORIZON, seeded with the table's recent ids"
        )
    return (
        f"next: make redeploy INSTANCE={instance} (or cdk deploy) submits the job; it starts "
        "a new checkpoint from TRIM_HORIZON, seeded with the table's recent ids"
    )


def migrate(
    target: Target,
    *,
    dry_run: bool,
    attempts: int,
    log: Callable[[str], None],
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    config = target.config
    location = config.checkpoint_location.rstrip("/")
    s3 = target.client("s3")
    running = job_state(config, s3, time.time())
    if running.running:
        raise OperatorError(
            EXIT_RUNNING,
            f"{target.instance_id}: job {running.line()}; stop it first: make stop-job "
            f"INSTANCE={target.instance_id}",
        )
    resume = None
    if is_s3(location):
        resume = unfinished_move(s3, S3Prefix.of(location), attempts)
    state = inspect_checkpoint(location, s3)
    old = state.old_operators
    if not old and resume is None:
        found = ", ".join(f"{op.operator_id}:{op.name}" for op in state.operators) or "none"
        log(
            f"{target.instance_id}: checkpoint {location} holds no state the job cannot "
            f"resume (stateful operators: {found}); nothing to move"
        )
        return EXIT_MOVED
    operator = old[0].name if old else OLD_DEDUP_OPERATOR
    aside = resume.uri() if resume is not None else aside_location(location, operator, clock())
    what = "; ".join(op.describe() for op in old)
    log(f"{target.instance_id}: checkpoint {location} holds {what or 'a move begun earlier'}")
    if resume is not None:
        log(f"  resuming the move begun earlier into {aside}")
    if config.source.starting_position != "TRIM_HORIZON":
        log(
            f"  WARNING: source.starting_position is {config.source.starting_position}: the new "
            "checkpoint starts there, so records put while the job was stopped are skipped; "
            "set TRIM_HORIZON (the default) for the restart"
        )
    if dry_run:
        log(f"  dry run: would move it to {aside}; nothing changed")
        log("  " + next_step(target))
        return EXIT_MOVED
    keep = kept_inside(location, config.failure_store_uri)
    if keep:
        log(f"  {location}/{keep} (the claim-check store) stays where it is")
    lease = make_lease(location, config.instance_id, config.lease_ttl_sec, s3)
    try:
        lease.acquire(0)
    except LeaseHeldError as exc:
        raise OperatorError(EXIT_RUNNING, f"{target.instance_id}: {exc}") from exc
    keeper = LeaseKeeper(lease)
    keeper.start()
    try:
        if is_s3(location):
            count = move_s3(
                s3,
                S3Prefix.of(location),
                S3Prefix.of(aside),
                operator=operator,
                attempts=attempts,
                log=log,
                clock=clock,
                keep=keep,
            )
            if keeper.lost.is_set():
                raise OperatorError(EXIT_PARTIAL, f"lease lost during the move: {keeper.reason}")
            log(f"  moved {count:,} objects to {aside}")
        else:
            move_local(
                Path(local_path(location)),
                Path(local_path(aside)),
                operator=operator,
                now=clock(),
                keep=keep,
            )
            log(f"  moved to {aside}")
    finally:
        keeper.stop()
        lease.release()
    log(f"  the old checkpoint stays there until you delete it ({OPERATE_SECTION})")
    log("  " + next_step(target))
    return EXIT_MOVED


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m scripts.migrate_checkpoint", description=__doc__.split("\n")[0]
    )
    target_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="say what would move; change nothing")
    p.add_argument(
        "--max-attempts",
        type=positive_int,
        default=DEFAULT_ATTEMPTS,
        help=f"tries per S3 call before the move stops (default {DEFAULT_ATTEMPTS})",
    )
    return p


def main(argv: Sequence[str] | None = None, out: Any = None) -> int:
    def act(target: Target, args: argparse.Namespace, say: Callable[[str], None]) -> int:
        if args.max_attempts < 1:
            raise OperatorError(EXIT_USAGE, "--max-attempts must be >= 1")
        return migrate(target, dry_run=args.dry_run, attempts=args.max_attempts, log=say)

    return target_command("migrate-checkpoint", parser(), act, argv, out)


if __name__ == "__main__":
    sys.exit(main())
