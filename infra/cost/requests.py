"""The AWS requests one micro-batch makes, as measured (``python -m
bench.requests`` writes :data:`COUNTS_FILE`; ``make cost`` multiplies them,
:mod:`infra.cost.lines`).

One file, read by the estimate and written only by the measurement, so the
price of a batch follows what the job does, not a figure someone typed. The
counts are per target (``emr``: the job as an EMR step runs it; ``serverless``:
the spark-submit of its StartJobRun request), by service, API and, for S3,
prefix. How each count is obtained (which log, what stands for S3 and Glue
locally): :mod:`local.request_log` and docs/sizing.md "Requests per batch".
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

COUNTS_FILE: Final = Path(__file__).resolve().parent / "request_counts.json"
TARGETS: Final = ("emr", "serverless")

# S3 bills PUT, COPY, POST and LIST at the PUT rate, GET, SELECT and every
# other request at the GET rate; DELETE is free
# (https://aws.amazon.com/s3/pricing/, "Requests & data retrievals").
S3_PUT_CLASS: Final = frozenset({"PutObject", "CopyObject", "ListObjectsV2"})
S3_FREE: Final = frozenset({"DeleteObject", "DeleteObjects"})


class RequestCountsError(ValueError):
    """The counts file is missing or malformed; the message names it and what was expected."""


@dataclass(frozen=True)
class Count:
    service: str
    api: str
    prefix: str
    per_batch: float


@dataclass(frozen=True)
class TargetCounts:
    """One target's measured requests per batch."""

    target: str
    instance: str
    batches: int  # the steady batches the counts are averaged over
    cold_batches: int  # the first batches left out
    measured: str  # the date of the run
    counts: tuple[Count, ...]
    serial: float  # of them, one after another on the batch's critical path

    def total(self, service: str, apis: frozenset[str] | None = None) -> float:
        return sum(
            c.per_batch
            for c in self.counts
            if c.service == service and (apis is None or c.api in apis)
        )

    @property
    def s3_put_class(self) -> float:
        return self.total("s3", S3_PUT_CLASS)

    @property
    def s3_get_class(self) -> float:
        return self.total("s3") - self.s3_put_class - self.total("s3", S3_FREE)

    @property
    def glue(self) -> float:
        return self.total("glue")

    @property
    def put_metric_data(self) -> float:
        return self.total("monitoring", frozenset({"PutMetricData"}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "batches": self.batches,
            "cold_batches": self.cold_batches,
            "measured": self.measured,
            "serial": round(self.serial, 2),
            "requests": [
                {
                    "service": c.service,
                    "api": c.api,
                    "prefix": c.prefix,
                    "per_batch": round(c.per_batch, 2),
                }
                for c in self.counts
            ],
        }


def from_dict(target: str, raw: Mapping[str, Any]) -> TargetCounts:
    try:
        return TargetCounts(
            target,
            str(raw["instance"]),
            int(raw["batches"]),
            int(raw["cold_batches"]),
            str(raw["measured"]),
            tuple(
                Count(str(c["service"]), str(c["api"]), str(c["prefix"]), float(c["per_batch"]))
                for c in raw["requests"]
            ),
            float(raw["serial"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise RequestCountsError(f"{target}: malformed counts ({exc!r})") from exc


def to_json(counts: Mapping[str, TargetCounts], command: str) -> str:
    return (
        json.dumps(
            {
                "command": command,
                "targets": {t: counts[t].to_dict() for t in TARGETS if t in counts},
            },
            indent=2,
        )
        + "\n"
    )


def read_counts(path: Path = COUNTS_FILE) -> dict[str, TargetCounts]:
    """Every target's counts; a missing target or file stops with one line."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RequestCountsError(
            f"{path}: cannot read the measured requests per batch ({exc}); "
            "run python -m bench.requests"
        ) from exc
    targets = raw.get("targets", {}) if isinstance(raw, dict) else {}
    missing = [t for t in TARGETS if t not in targets]
    if missing:
        raise RequestCountsError(
            f"{path}: no counts for {', '.join(missing)}; expected {', '.join(TARGETS)}"
        )
    return {t: from_dict(t, targets[t]) for t in TARGETS}
