"""What a local run (``make run``) leaves for a command aimed at it.

The harness writes each instance's job config to
``<work dir>/<instance>/job.json`` and hands that file to ``python -m job``;
its endpoints point at the run's emulators, which take the fake credentials
below. ``make maintain`` and the operator commands given ``--work-dir``
(``status``, ``stop-job``, ``produce``, ``reprocess``, ``migrate-checkpoint``)
find the job where the harness put it and sign as the harness does
(:func:`emulator_client`), so the layout and the credentials are written down
once, here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from model import aws_clients

# Relative to the repository root, where make runs every command.
DEFAULT_WORK_DIR: Final = Path(".work") / "run"
JOB_CONFIG_FILE: Final = "job.json"
# The emulated account: moto accepts any key, but the harness, the job it
# starts and every command aimed at the run must agree on one.
FAKE_CREDENTIALS: Final = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
# The same, as boto3's client keywords (the variables' names in lower case).
_CLIENT_CREDENTIALS: Final = {name.lower(): value for name, value in FAKE_CREDENTIALS.items()}


def emulator_client(
    service: str, limits: aws_clients.ClientLimits, region: str, endpoint_url: str | None
) -> Any:
    """A client of the run's emulators (at ``endpoint_url``), signed as the emulated account."""
    return aws_clients.client(
        service, limits, region=region, endpoint_url=endpoint_url, credentials=_CLIENT_CREDENTIALS
    )


def instance_dir(work_dir: Path, instance: str) -> Path:
    """Where the run keeps ``instance``'s job config, checkpoint, table and logs."""
    return work_dir / instance


def job_config_path(work_dir: Path, instance: str) -> Path:
    """The job config the run started ``instance``'s job with."""
    return instance_dir(work_dir, instance) / JOB_CONFIG_FILE


def instances_run(work_dir: Path) -> list[str]:
    """The instances with a job config under ``work_dir`` (none: not a run's work dir)."""
    if not work_dir.is_dir():
        return []
    return sorted(d.name for d in work_dir.iterdir() if (d / JOB_CONFIG_FILE).is_file())


# ``make produce --work-dir`` into a running ``make run``: each invocation
# leaves a record here (<work dir>/<instance>/produced/<name>.json), first
# "producing" with the ids it is about to send, then "done" with what it sent;
# the run waits for the ones under way and counts the done ones in its summary
# (local/harness.py), so records produced from outside are accepted.
PRODUCED_DIR: Final = "produced"


def produced_dir(work_dir: Path, instance: str) -> Path:
    """Where ``make produce --work-dir`` records what it put into ``instance``."""
    return instance_dir(work_dir, instance) / PRODUCED_DIR


@dataclass(frozen=True)
class OutsideProduce:
    """One ``make produce`` into the run: ``done`` once every record was put."""

    name: str
    done: bool
    ids: frozenset[str]
    failures: Mapping[str, str] = field(default_factory=dict)
    records: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)
    kinesis_records: int = 0
    aggregates: int = 0

    def to_json(self) -> str:
        raw = asdict(self)
        raw["ids"] = sorted(self.ids)
        return json.dumps(raw, indent=1, sort_keys=True)


def write_outside(directory: Path, produce: OutsideProduce) -> Path:
    """Write (or replace) ``produce``'s record atomically: a reader never sees half."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{produce.name}.json"
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(produce.to_json(), encoding="utf-8")
    temporary.replace(path)
    return path


def read_outside(directory: Path) -> list[OutsideProduce]:
    """Every ``make produce`` recorded in ``directory`` (none: no directory)."""
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        found.append(
            OutsideProduce(
                name=str(raw["name"]),
                done=bool(raw["done"]),
                ids=frozenset(str(i) for i in raw["ids"]),
                failures={str(k): str(v) for k, v in raw.get("failures", {}).items()},
                records=int(raw.get("records", 0)),
                counts={str(k): int(v) for k, v in raw.get("counts", {}).items()},
                kinesis_records=int(raw.get("kinesis_records", 0)),
                aggregates=int(raw.get("aggregates", 0)),
            )
        )
    return found
