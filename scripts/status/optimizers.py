"""The events table's Glue table optimizers: enabled or not, and their last run.

The stack gives the events table three optimizers (compaction, snapshot
retention, orphan-file deletion; ``infra/constructs/events_table.py``). One
``BatchGetTableOptimizer`` call reads the three
(https://docs.aws.amazon.com/glue/latest/webapi/API_BatchGetTableOptimizer.html;
``catalogId`` may be left out,
https://docs.aws.amazon.com/glue/latest/webapi/API_BatchGetTableOptimizerEntry.html):
each one's ``configuration.enabled`` and ``lastRun`` (``eventType`` starting |
completed | failed | in_progress, start and end, error;
https://docs.aws.amazon.com/glue/latest/webapi/API_TableOptimizerRun.html). A
type Glue does not know comes back in ``Failures``.

Why look: "When compaction operations fail four consecutive times, AWS Glue
catalog table optimization automatically suspends the optimizer"; it stays
suspended until someone enables it again
(https://docs.aws.amazon.com/glue/latest/dg/optimizer-notes.html). Nothing
else tells: the job keeps committing, and the table's small files pile up. So
a disabled optimizer, a failed last run and a missing one are flagged.

Locally there is nothing to read: a local run's catalog is SQLite, and moto
does not implement the optimizer calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

OPTIMIZER_TYPES: Final = ("compaction", "retention", "orphan_file_deletion")
FAILED: Final = "failed"
# The caller's permission for the call
# (https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsglue.html).
PERMISSION: Final = "glue:BatchGetTableOptimizer"


@dataclass(frozen=True)
class OptimizerRun:
    status: str  # eventType: starting | completed | failed | in_progress
    started: datetime | None = None
    ended: datetime | None = None
    error: str | None = None


@dataclass(frozen=True)
class OptimizerState:
    type: str
    found: bool
    enabled: bool | None = None  # None: not found
    last_run: OptimizerRun | None = None  # None: never ran (or not found)
    problem: str | None = None  # why it was not found (Glue's error)

    @property
    def flags(self) -> list[str]:
        """What needs an operator, worst first; empty when healthy."""
        if not self.found:
            return ["missing"]
        found = []
        if self.enabled is False:
            found.append("disabled")
        if self.last_run is not None and self.last_run.status == FAILED:
            found.append("last run failed")
        return found


@dataclass(frozen=True)
class Optimizers:
    """``available``: the optimizers were read; else ``note`` says why not."""

    available: bool
    note: str = ""
    states: list[OptimizerState] = field(default_factory=list)

    @property
    def flagged(self) -> list[OptimizerState]:
        return [s for s in self.states if s.flags]


def not_available_locally() -> Optimizers:
    return Optimizers(
        False,
        "not available locally (the local run's catalog is SQLite; Glue table optimizers "
        "exist on AWS only)",
    )


def _utc(value: Any) -> datetime | None:
    """botocore parses an epoch timestamp into local time; the report is in UTC."""
    return value.astimezone(UTC) if isinstance(value, datetime) else None


def _run(raw: Mapping[str, Any] | None) -> OptimizerRun | None:
    if not raw:
        return None
    return OptimizerRun(
        status=str(raw.get("eventType", "?")),
        started=_utc(raw.get("startTimestamp")),
        ended=_utc(raw.get("endTimestamp")),
        error=raw.get("error") or None,
    )


def optimizer_states(response: Mapping[str, Any]) -> list[OptimizerState]:
    """The three optimizers from a BatchGetTableOptimizer response, in
    :data:`OPTIMIZER_TYPES` order; one neither returned nor failed is missing. Pure."""
    found: dict[str, OptimizerState] = {}
    for item in response.get("TableOptimizers", []):
        optimizer = item.get("tableOptimizer", {})
        kind = str(optimizer.get("type", ""))
        enabled = optimizer.get("configuration", {}).get("enabled")
        found[kind] = OptimizerState(
            type=kind,
            found=True,
            enabled=None if enabled is None else bool(enabled),
            last_run=_run(optimizer.get("lastRun")),
        )
    for failure in response.get("Failures", []):
        kind = str(failure.get("type", ""))
        error = failure.get("error", {})
        problem = ": ".join(
            str(part) for part in (error.get("ErrorCode"), error.get("ErrorMessage")) if part
        )
        found.setdefault(kind, OptimizerState(kind, found=False, problem=problem or None))
    return [found.get(kind, OptimizerState(kind, found=False)) for kind in OPTIMIZER_TYPES]


def read_optimizers(glue: Any, database: str, table: str) -> Optimizers:
    """The table's optimizers on AWS. A failed call is reported, not raised:
    the rest of the status is still worth printing."""
    entries = [{"databaseName": database, "tableName": table, "type": t} for t in OPTIMIZER_TYPES]
    try:
        response = glue.batch_get_table_optimizer(Entries=entries)
    except (BotoCoreError, ClientError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Optimizers(False, f"BatchGetTableOptimizer failed: {first} (needs {PERMISSION})")
    return Optimizers(True, states=optimizer_states(response))


# What to do about a flag. The stack creates every optimizer enabled, so a
# disabled one was suspended by Glue (compaction, four failures in a row) or
# turned off by hand. Each optimizer type logs to its own
# /aws-glue/iceberg-<type>/logs group
# (https://docs.aws.amazon.com/glue/latest/dg/optimization-prerequisites.html).
ADVICE: Final = {
    "disabled": (
        "Glue suspends an optimizer after repeated failed runs (compaction: four in a row, "
        "https://docs.aws.amazon.com/glue/latest/dg/optimizer-notes.html); read its last "
        "error and its /aws-glue/iceberg-* log group, fix the cause, then enable it again "
        "(Glue console, the table's Table optimization tab)"
    ),
    "last run failed": "read the error above and the optimizer's /aws-glue/iceberg-* log group",
    "missing": "the stack creates it (EventsTable*); deploy the instance with cdk deploy",
}
