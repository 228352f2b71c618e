"""What a local run (``make run``) leaves for a command aimed at it.

The harness writes each instance's job config to
``<work dir>/<instance>/job.json`` and hands that file to ``python -m app``;
its endpoints point at the run's emulators, which take the fake credentials
below. ``make maintain`` and the operator commands given ``--work-dir``
(``status``, ``stop-job``, ``produce``, ``reprocess``, ``migrate-checkpoint``)
find the job where the harness put it and sign as the harness does
(:func:`emulator_client`), so the layout and the credentials are written down
once, here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from app import aws_clients

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
