"""``python -m local.maintain``: table upkeep for a local run (``make maintain``).

On AWS the Glue table optimizers do this for each instance's table; locally
nothing else would: expire snapshots past the retention (a metadata-only
commit), then delete the files the table's metadata no longer reaches and that
are older than the orphan retention: what a job killed between writing its
data files and committing them left behind, and what expired snapshots alone
referenced. Run it while the job is stopped or running: the retention keeps
the files of a commit in flight.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

from job.table.catalog import load_table
from job.table.commit import expire_snapshots
from local.table import delete_orphans, table_exists
from model.config import ConfigError, JobConfig
from producer.local_run import DEFAULT_WORK_DIR, JOB_CONFIG_FILE, instances_run, job_config_path


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m local.maintain", description=__doc__)
    parser.add_argument("--work-dir", type=Path, default=DEFAULT_WORK_DIR)
    parser.add_argument(
        "--orphan-age-hours",
        type=float,
        default=None,
        help="delete unreferenced files older than this (default: the instance's "
        "table_maintenance.orphan_file_retention_days)",
    )
    return parser.parse_args(argv)


def maintain(config: JobConfig, orphan_age: timedelta | None) -> tuple[int, int]:
    """(snapshots expired, orphan files deleted) for one instance's table."""
    if not table_exists(config):
        return 0, 0
    expired = expire_snapshots(load_table(config), config.table_maintenance)
    age = orphan_age or timedelta(days=config.table_maintenance.orphan_file_retention_days)
    return expired, len(delete_orphans(config, age))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configs = [job_config_path(args.work_dir, i) for i in instances_run(args.work_dir)]
    if not configs:
        print(f"error: no local run under {args.work_dir} (expected <instance>/{JOB_CONFIG_FILE})")
        return 2
    age = None if args.orphan_age_hours is None else timedelta(hours=args.orphan_age_hours)
    for path in configs:
        try:
            config = JobConfig.from_file(path)
        except ConfigError as exc:
            print(f"error: {path}: {exc}")
            return 2
        expired, deleted = maintain(config, age)
        print(f"{config.instance_id}: {expired} snapshots expired, {deleted} orphan files deleted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
