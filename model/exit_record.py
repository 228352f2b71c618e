"""The job's exit reason, as a record beside its lease: why it last stopped.

Why: the EMR step completes as soon as YARN accepts the job
(``spark.yarn.submit.waitAppCompletion=false``), so nothing outside the
cluster learns how the job ended. The supervisor must tell a batch that failed
(restart it) from a configuration or checkpoint that was refused (a restart
cannot cure it) and from a stop someone asked for (leave it stopped), without
parsing logs. So the job writes ``<checkpoint>/_exit`` on the way out: its
exit code, the reason's name (:mod:`model.contract`), one line of detail, when,
and which process. The launcher writes the same shape for its own exit 8.

Best effort by design: a record that cannot be written is logged and the job
exits with its code anyway; a job killed with SIGKILL writes nothing, which
the supervisor reads as "vanished" (the previous record is older than the run
it last saw). Stdlib only: the supervisor's Lambda package carries this file.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

from model.contract import exit_record_path
from model.storage_uri import read_object_if_present, write_object

log = logging.getLogger(__name__)

_MAX_DETAIL = 1_000
_HEAD = 300


class ExitRecordError(ValueError):
    """An exit record that is not the shape this module writes."""


@dataclass(frozen=True)
class ExitRecord:
    """``code`` the process's exit code; ``reason`` an ``model.contract.EXIT_*``
    name; ``at`` epoch seconds; ``owner`` ``host:pid``; ``stopped_by`` who
    asked for a stop (``model.contract.STOP_BY_*``), set only for a stop on request."""

    code: int
    reason: str
    detail: str
    at: float
    owner: str
    stopped_by: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, where: str = "exit record") -> ExitRecord:
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ExitRecordError(f"{where}: not JSON ({exc})") from exc
        if not isinstance(raw, dict):
            raise ExitRecordError(f"{where}: expected a JSON object, got {type(raw).__name__}")
        try:
            stopped_by = raw.get("stopped_by")
            return cls(
                code=int(raw["code"]),
                reason=str(raw["reason"]),
                detail=str(raw.get("detail", "")),
                at=float(raw["at"]),
                owner=str(raw.get("owner", "unknown")),
                stopped_by=None if stopped_by is None else str(stopped_by),
            )
        except KeyError as exc:
            raise ExitRecordError(f"{where}: field {exc.args[0]!r} missing") from exc
        except (TypeError, ValueError) as exc:
            raise ExitRecordError(f"{where}: {exc}; expected code int, at number") from exc

    def line(self) -> str:
        by = f" by {self.stopped_by}" if self.stopped_by else ""
        return f"exit {self.code} {self.reason}{by}: {self.detail}"


def shorten(detail: str) -> str:
    """One line, bounded: the record is read by a Lambda and shown by status.
    A long one keeps its head (what failed) and its tail (a Python traceback's
    last line is the cause)."""
    flat = " ".join(detail.split())
    if len(flat) <= _MAX_DETAIL:
        return flat
    return flat[:_HEAD] + " ... " + flat[-(_MAX_DETAIL - _HEAD) :]


def write_exit_record(checkpoint_location: str, record: ExitRecord, s3_client: Any = None) -> bool:
    """Write the record; False (logged) when it could not be written."""
    path = exit_record_path(checkpoint_location)
    body = record.to_json().encode("utf-8")
    try:
        write_object(path, body, s3_client)  # locally, a reader never sees half a record
    except Exception as exc:  # best effort: the exit code is what the process returns
        log.warning("could not write the exit record %s: %s: %s", path, type(exc).__name__, exc)
        return False
    return True


def read_exit_record(checkpoint_location: str, s3_client: Any = None) -> ExitRecord | None:
    """The last record, or None when the job never wrote one."""
    path = exit_record_path(checkpoint_location)
    body = read_object_if_present(path, s3_client)
    return None if body is None else ExitRecord.from_json(body, path)
